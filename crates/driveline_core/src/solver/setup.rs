//! Building a simulation: sizing its state and workspaces, compiling the base mode, the first mode selection.

use super::*;

/// How many simulations of one network the mode library keeps room for (see `starting_at`).
const LIBRARY_ROOM: usize = 4;

impl Simulation {
    /// Creates a simulation at the network's initial state, t = 0.
    pub fn new(net: Network) -> Self {
        Self::with_parameters(net, IntegrationParameters::default())
    }

    /// Creates a simulation with explicit solver parameters.
    pub fn with_parameters(net: Network, params: IntegrationParameters) -> Self {
        Self::starting_at(net, params, 0.0)
    }

    /// Creates a simulation whose clock starts at `t0` s (signals are functions of absolute
    /// time; a rebuilt network continues where the old one was).
    pub fn starting_at(net: Network, params: IntegrationParameters, t0: f64) -> Self {
        let n = net.n_dof;
        let nf = net.friction.len();
        let nl = net.laws.len();
        let nk = net.kinematic.len();
        let rmax = net.rows.len() + nf + nk;
        // The first slot, sized for every coordinate free, takes the base mode (no lock, no
        // engaged kinematic clutch). Every other mode adds rows to it, so its free-coordinate
        // count bounds theirs: the other slots and the library's entries are sized by it (a
        // third of the memory of a mode cache).
        let model = Model::new(net);
        let net = &model.net;
        let slots = vec![ModeSlot::new(model.modes.empty(), nf)];
        let ns = net.signals.len();
        let mut sim = Simulation {
            phi: net.phi_start.clone(),
            w: net.w_start.clone(),
            modes: vec![FrictionMode::Free; nf],
            regimes: vec![LawState::default(); nl],
            kin_engaged: vec![false; nk],
            kin_modes: vec![FrictionMode::Free; nk],
            slots,
            cur: 0,
            newton: NewtonPool::new(0, 0),
            clock: 0,
            next_time_event: 0.0,
            epoch: 0,
            // (A law that reads the state keeps every mode off the time-only kernel.)
            kernel: if model.laws_state_free {
                time_only::TimeOnly::new(n, rmax, nl, nf)
            } else {
                time_only::TimeOnly::new(0, 0, 0, 0)
            },
            started: false,
            pred: Predictor::new(n),
            ws: Work::new(net),
            sc: Box::new(Scratch::placeholder()),
            // (Sized for every coordinate free until the base mode is compiled.)
            scratch_shape: ScratchShape::of(net, n),
            lease: (0, 0),
            events: CapVec::new(4 * (nf + nl) + 8),
            stats: StepStats::default(),
            energy: EnergyLedger::default(),
            out_tau: vec![0.0; net.elements.len()],
            out_power: vec![0.0; net.elements.len()],
            t: 0.0,
            params,
            signals: SignalCache::new(ns),
            // (A law reads at most one input, a friction element one normal force or load.)
            inputs: InputSteps::new(ns, model.input_names.len(), nl + nf),
            friction: FrictionSets::new(nf),
            capacities: CapacityCache::new(),
            qp: model.modes.empty(),
            thermal: net.thermal.as_ref().map(|th| Box::new(thermal::Thermal::new(net, &model.signals, th, t0))),
            accel: accel::Accelerations::for_network(net),
            model,
        };
        sim.mirror_inputs();
        sim.count_unsteady();
        sim.compile_into(0, 0);
        sim.model.fastest_rate = sim.linear_rate_bound();
        let mmax = sim.slots[0].m;
        let more = sim.params.mode_cache_slots.max(3) - 1;
        // Room in the library for the modes of up to four simulations of the network alive
        // at once, each holding other modes (one per slot and the last base mode the
        // complementarity problem read): their steps do not allocate. Beyond, a fleet's
        // library grows by an entry when all are held (once per compiled mode it adds).
        let live = Arc::strong_count(&sim.model.modes).min(LIBRARY_ROOM);
        sim.model.modes.reserve((more + 2) * live, mmax);
        sim.newton = NewtonPool::new(sim.params.newton_sets.clamp(1, more + 1), mmax);
        sim.scratch_shape = ScratchShape::of(&sim.model.net, mmax);
        sim.resize_slots(more + 1);
        let took = sim.take_scratch();
        sim.start(if t0.is_finite() { t0 } else { 0.0 });
        sim.give_back_scratch(took);
        sim
    }

    /// Where each element's mode comes from, in the order [`Simulation::element_mode`] has
    /// always looked: friction element, kinematic clutch, lossless gear, elastic clutch law.
    pub(super) fn mode_sources(net: &Network) -> Vec<ModeSource> {
        (0..net.elements.len())
            .map(|e| {
                let info = &net.elements[e];
                if let Some(k) = info.friction {
                    ModeSource::Friction(k)
                } else if let Some(j) = net.kinematic.iter().position(|k| k.element == e) {
                    ModeSource::Kinematic(j)
                } else if info.kind == "LossyGear" || info.kind == "Gearbox" {
                    ModeSource::Ideal // lossless table: an ideal gear (MSL mode 2)
                } else if let Some(k) = info.law.filter(|&k| matches!(net.laws[k], Law::ElasticClutch { .. })) {
                    ModeSource::Law(k)
                } else {
                    ModeSource::None
                }
            })
            .collect()
    }

    /// The normalised normal-force signal of element `e` of `net`, if it is a clutch or brake
    /// whose normal force is one ([`Simulation::element_engagement`]).
    pub(super) fn engagement_signal(net: &Network, e: &crate::network::ElementInfo) -> Option<u32> {
        match net.friction[e.friction?].law {
            crate::elements::FrictionLaw::Normal { signal, .. } => Some(signal as u32),
            _ => None,
        }
    }

    /// The permanent rows that report an element torque (see `row_outputs`).
    pub(super) fn row_outputs(net: &Network) -> Vec<(usize, usize, f64)> {
        let mut out = Vec::new();
        for (ri, &e) in net.row_element.iter().enumerate() {
            let info = &net.elements[e];
            match info.kind {
                "IdealGear" | "LossyGear" => {
                    let cb = net.rows[ri].entries.iter().find(|x| x.0 == info.nodes[1]).map(|x| x.1).unwrap_or(0.0);
                    out.push((ri, e, -cb));
                }
                "Speed" | "ConstantSpeed" | "Accelerate" | "Position" | "Move" | "LinearSpeed" => {
                    out.push((ri, e, 1.0))
                }
                // (The joint w_a - w_b = 0 takes -flange_a.tau as its multiplier.)
                "TorqueSensor" | "PowerSensor" | "MultiSensor" => out.push((ri, e, -1.0)),
                // (Its joint is written w_b - w_a = 0: the opposite sign.)
                "Disc" => out.push((ri, e, 1.0)),
                _ => {}
            }
        }
        out
    }

    pub(super) fn start(&mut self, t0: f64) {
        self.t = t0;
        // Integrals start from their value at the start time.
        let integrals: usize = self.model.signals.iter_mut().map(|s| s.restart_integrals(t0, false)).sum();
        self.model.integrals = integrals > 0;
        self.thermal_inputs_now(false);
        self.next_time_event = self.compute_next_time_event(t0);
        self.fill_signals(2, t0, false);
        for (k, law) in self.model.net.laws.iter().enumerate() {
            self.regimes[k] = law.initial_state(&self.phi, &self.w, &self.ws.sig[2]);
        }
        self.select_modes(0, true);
        self.events.clear();
        self.restart_ledger();
        self.update_outputs();
        // (The temperatures' slopes from the losses now: the first step's law sees them move.)
        self.thermal_inputs_now(true);
        // Ground nodes do not turn: their speeds are zero, in the state and in the scratch.
        let n = self.model.n_dof;
        self.w[n..].fill(0.0);
        self.ground_scratch();
        self.started = true;
    }

    /// Writes the ground entries of the scratch's stage and end states. They never change: equal
    /// to the state's, written when the simulation starts and when it borrows a scratch another
    /// simulation used (the time-only kernel commits a sub-step by trading the state's buffers
    /// with the end's). Ground nodes do not turn.
    ///
    /// Left as they are when they and this simulation's ground angles are all `+0.0`
    /// ([`Scratch::ground_zero`]): vehicles of one file have the same ground angles, so the
    /// scratch the last of them left holds this one's already.
    pub(super) fn ground_scratch(&mut self) {
        let n = self.model.n_dof;
        let zero = self.ground_is_zero();
        if zero && self.sc.ground_zero {
            return;
        }
        let Scratch { phi_st, w_st, phi1, w1, ground_zero, .. } = &mut *self.sc;
        for (phi, w) in phi_st.iter_mut().zip(w_st.iter_mut()).chain([(phi1, w1)]) {
            w[n..].fill(0.0);
            phi[n..].copy_from_slice(&self.phi[n..]);
        }
        *ground_zero = zero;
    }

    /// Whether every ground node's angle is `+0.0` (see [`Scratch::ground_zero`]).
    fn ground_is_zero(&self) -> bool {
        self.phi[self.model.n_dof..].iter().all(|p| p.to_bits() == 0)
    }

    pub(super) fn compute_next_time_event(&self, t: f64) -> f64 {
        self.model.signals.iter().map(|s| s.next_event_after(t)).fold(f64::INFINITY, f64::min)
    }
}

/// The laws whose input each signal is ([`Law::input_signal`]), grouped by signal: signal
/// `k`'s are `laws[start[k]..start[k + 1]]`. Returns `(start, laws)`.
fn input_law_index(net: &Network) -> (Vec<u32>, Vec<u32>) {
    let mut start = vec![0u32; net.signals.len() + 1];
    for law in &net.laws {
        if let Some(k) = law.input_signal() {
            start[k + 1] += 1;
        }
    }
    for k in 0..net.signals.len() {
        start[k + 1] += start[k];
    }
    let mut by_signal: Vec<(usize, u32)> =
        net.laws.iter().enumerate().filter_map(|(l, law)| Some((law.input_signal()?, l as u32))).collect();
    by_signal.sort_unstable();
    (start, by_signal.into_iter().map(|(_, l)| l).collect())
}

/// The network and what the solver derives from it once: immutable, and shared by every
/// simulation of an equal network through its mode library ([`library::ModeLibrary`]). Its
/// network's signals are those the first such simulation was built with; a simulation reads
/// its own ([`Model::signals`]).
#[derive(Debug)]
pub(super) struct Derived {
    pub(super) net: Network,
    /// The laws whose input each signal is ([`Law::input_signal`]): signal `k`'s are
    /// `input_laws[input_law_start[k]..input_law_start[k + 1]]`.
    pub(super) input_law_start: Vec<u32>,
    pub(super) input_laws: Vec<u32>,
    /// For each signal, the friction elements whose law reads it (their normal force or
    /// load), as a mask.
    pub(super) readers: Vec<u64>,
    /// The permanent rows that report a torque, as `(row, element, coefficient)`: a gear
    /// reports `flange_b.tau = -c_b lambda`, a speed source `lambda` (derived once from the
    /// element kinds, not matched by name every step).
    pub(super) row_outputs: Vec<(usize, usize, f64)>,
    /// Where each element's mode comes from (see [`Simulation::element_mode`]).
    pub(super) mode_sources: Vec<ModeSource>,
    /// Each element's relative-coordinate row, copied out of the network's element records
    /// (176 bytes each, name and flange list included) into an array of its own, which the
    /// per-step readers (controllers, telemetry, the ECS write-back) touch line by line.
    pub(super) out_rel: Vec<Option<Row>>,
    /// Each element's body node (Inertia, Mass), likewise.
    pub(super) out_body: Vec<Option<u32>>,
    /// Each clutch's or brake's normalised normal-force signal, likewise (the ECS writes the
    /// engagement of every clutch part back after every step).
    pub(super) out_engagement: Vec<Option<u32>>,
    /// The bodies' outputs, `(element, node)` in element order: what
    /// [`Simulation::for_each_element_output`] reads for them, without a pass over the others.
    pub(super) out_bodies: Vec<(u32, u32)>,
    /// The other elements that report anything (a relative coordinate or an engagement), in
    /// element order, each with what that pass reads for it in one record.
    pub(super) out_couplings: Vec<CouplingOutput>,
    /// The run-time input names, each once, in [`Simulation::input_names`] order.
    pub(super) input_names: Vec<String>,
    /// Per signal that is a whole input, its name's index in `input_names` (`u32::MAX`: not an
    /// input).
    pub(super) signal_name: Vec<u32>,
    /// Per signal that is a whole input, its place in the simulation's dense copy of the inputs'
    /// values (`InputSteps::mirror`; `u32::MAX`: not an input), the whole inputs in signal order.
    pub(super) input_slot: Vec<u32>,
}

/// What a simulation runs: the shared network and its derived data (through the mode library,
/// read as the [`Derived`] it dereferences to), and this simulation's own signals, whose run-time
/// input values, integrals and filters are state.
#[derive(Debug, Clone)]
pub(super) struct Model {
    /// The signals the laws read by index: this simulation's (the shared network's are not read).
    pub(super) signals: Vec<Signal>,
    /// The LossyGear friction elements, as a mask.
    pub(super) lossy: u64,
    /// The friction elements whose sliding torque depends on the constraint torques (rolling
    /// LossyGears, limited-slip packs), as a mask: the force pipeline corrects for those that
    /// slide.
    pub(super) torque_dependent: u64,
    /// Some law's force reads angles ([`Law::reads_angles`]): Newton iterations need the
    /// stage angles, not only the stage speeds.
    pub(super) laws_read_angles: bool,
    /// The friction elements whose sliding torque reads the signals only
    /// ([`FrictionLaw::is_time_only`](crate::elements::FrictionLaw::is_time_only)), as a mask. With `laws_state_free`, a mode where only
    /// these slide has forces that depend on time alone.
    pub(super) time_only: u64,
    /// The network's free coordinates (its `n_dof`). This and the masks above are copies of
    /// what the shared network gives, kept here because every step reads them.
    pub(super) n_dof: usize,
    /// Every law's force reads the signals only ([`Law::is_state_free`]).
    pub(super) laws_state_free: bool,
    /// [`Simulation::fastest_rate`], 1/s (set once the base mode is compiled).
    pub(super) fastest_rate: f64,
    /// Some signal holds a [`Signal::Integral`], carried forward at every step end.
    pub(super) integrals: bool,
    /// The compiled modes and the network they are of, shared with every simulation of an
    /// equal network.
    pub(super) modes: Arc<library::ModeLibrary>,
}

impl std::ops::Deref for Model {
    type Target = Derived;
    #[inline]
    fn deref(&self) -> &Derived {
        self.modes.derived()
    }
}

impl Model {
    /// The model of `net`: its library's shared network and derived data, and `net`'s own
    /// signals.
    fn new(net: Network) -> Self {
        let modes = library::ModeLibrary::for_network(&net);
        Model {
            n_dof: net.n_dof,
            lossy: mask_where(&net.friction, |fe| matches!(fe.law, crate::elements::FrictionLaw::Lossy { .. })),
            torque_dependent: mask_where(&net.friction, |fe| fe.law.is_torque_dependent()),
            laws_read_angles: net.laws.iter().any(Law::reads_angles),
            time_only: mask_where(&net.friction, |fe| fe.law.is_time_only()),
            laws_state_free: net.laws.iter().all(Law::is_state_free),
            fastest_rate: 0.0,
            integrals: false,
            modes,
            signals: {
                // (Assembled by pushes: its room beyond its length would be held for the life
                // of every simulation of the network.)
                let mut signals = net.signals;
                signals.shrink_to_fit();
                signals
            },
        }
    }
}

impl Derived {
    /// Derives what the solver reads of `net` from it once.
    pub(super) fn new(net: Network) -> Self {
        let (input_law_start, input_laws) = input_law_index(&net);
        let (input_names, signal_name) = inputs::InputPolicy::names_of(&net.signals);
        let mut slots = 0u32;
        let input_slot = (net.signals.iter())
            .map(|s| match s {
                crate::Signal::Input { .. } => {
                    slots += 1;
                    slots - 1
                }
                _ => u32::MAX,
            })
            .collect();
        let mode_sources = Simulation::mode_sources(&net);
        let out_engagement: Vec<Option<u32>> =
            net.elements.iter().map(|e| Simulation::engagement_signal(&net, e)).collect();
        let out_couplings = CouplingOutput::of(&net, &mode_sources, &out_engagement);
        Derived {
            input_names,
            signal_name,
            input_slot,
            readers: (0..net.signals.len())
                .map(|k| mask_where(&net.friction, |fe| fe.law.free_signal() == Some(k)))
                .collect(),
            row_outputs: Simulation::row_outputs(&net),
            mode_sources,
            out_rel: net.elements.iter().map(|e| e.rel).collect(),
            out_body: net.elements.iter().map(|e| e.body.map(|k| k as u32)).collect(),
            out_engagement,
            out_bodies: net.elements.iter().enumerate().filter_map(|(k, e)| Some((k as u32, e.body? as u32))).collect(),
            out_couplings,
            input_law_start,
            input_laws,
            net,
        }
    }
}
