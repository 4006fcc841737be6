//! Run-time inputs: setting them by name or id, and the force steps they make for the stage predictor.

use super::*;

/// A run-time input resolved once by [`Simulation::input_id`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputId(usize);

impl InputId {
    /// The input that is signal `k` (a whole signal, as [`Simulation::input_id`] resolves).
    pub(super) fn of_signal(k: usize) -> Self {
        InputId(k)
    }
}

/// The force change of one recorded input step ([`Simulation::input_changes`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum InputStepChange {
    /// A law's torque steps by `d`: `+d` on the first node, `-d` on the second.
    Law(usize, usize, f64),
    /// Sliding friction element `i`'s torque changes by `ratio` times itself.
    Friction(usize, f64),
}

/// Records that input signal `k` steps from `from` (its value now, before the change) to `to`
/// for the stage predictor ([`Simulation::input_step_forces`]): a second change of the same
/// input before the next step keeps the first value before. (There is room for every signal.)
pub(super) fn record_input_step(steps: &mut CapVec<(u32, f64, f64)>, pos: &mut [u32], k: usize, from: f64, to: f64) {
    match pos[k] {
        u32::MAX if steps.has_room() => {
            pos[k] = steps.len() as u32;
            steps.push((k as u32, from, to));
        }
        u32::MAX => {}
        p => steps[p as usize].2 = to,
    }
}
impl Simulation {
    /// Names of the run-time inputs ([`crate::Signal::Input`]) of the network, each once.
    pub fn input_names(&self) -> Vec<String> {
        self.model.input_names.clone()
    }

    /// The name of input `k` (its index in [`Simulation::input_names`]).
    pub fn input_name(&self, k: usize) -> Option<&str> {
        self.model.input_names.get(k).map(String::as_str)
    }

    /// The input values the input policy did not take as given since the step before the
    /// last (see [`Simulation::set_input`]): one per input and episode.
    pub fn input_rejections(&self) -> &[InputRejected] {
        &self.inputs.policy.raised
    }

    /// Sets a run-time input. It takes effect at the start of the next step (a time event:
    /// friction modes are re-resolved there). Unknown names are refused.
    ///
    /// # The input policy
    /// A value past +-[`limits::SIGNAL`](crate::limits::SIGNAL) (1e7, infinities included)
    /// is clamped to it and taken; NaN is refused with [`InputError::NotFinite`] and the input
    /// keeps its last valid value. Either raises an [`InputRejected`] once per episode (until
    /// the input is next given a valid value), readable from [`Simulation::input_rejections`]
    /// after the next step.
    pub fn set_input(&mut self, name: &str, value: f64) -> Result<(), InputError> {
        let Some(k) = self.model.input_names.iter().position(|n| n == name) else {
            return Err(InputError::Unknown(name.to_string()));
        };
        let last = self.model.signals.iter().find_map(|s| s.input_value(name, self.t)).unwrap_or(0.0);
        let Some(value) = self.inputs.policy.filter(k, value, last) else {
            return Err(InputError::NotFinite { name: name.to_string(), value });
        };
        let (mut hits, now) = (0, self.t);
        for (k, s) in self.model.signals.iter_mut().enumerate() {
            // A whole signal that steps is recorded as by id (one inside another signal is not).
            let before = match s {
                Signal::Input { name: n, .. } if n == name => Some(s.eval(now)),
                _ => None,
            };
            hits += s.set_input(name, value);
            if let Some(v) = before.filter(|&v| v != value) {
                record_input_step(&mut self.inputs.steps, &mut self.inputs.step_pos, k, v, value);
            }
        }
        if hits == 0 {
            return Err(InputError::Unknown(name.to_string()));
        }
        self.mirror_inputs();
        self.inputs.changed = true;
        self.signals_changed(true);
        Ok(())
    }

    /// A handle to a run-time input for per-step control loops: `Some` when the name occurs
    /// exactly once and as a whole signal (not inside a sum or product), so that
    /// [`Simulation::set_input_id`] can write it without a name lookup.
    pub fn input_id(&self, name: &str) -> Option<InputId> {
        let mut found = None;
        for (k, s) in self.model.signals.iter().enumerate() {
            let mut names = Vec::new();
            s.input_names(&mut names);
            if names.iter().any(|n| n == name) {
                if found.is_some() || !matches!(s, Signal::Input { .. }) {
                    return None;
                }
                found = Some(InputId(k));
            }
        }
        found
    }

    /// The run-time input behind a clutch's or brake's normalised normal force (its
    /// `f_normalized`), when that is a whole [`Signal::Input`]: the handle an actuator writes
    /// the engagement through. `None` for other elements, or a force that is a function of time.
    pub fn engagement_input(&self, element: usize) -> Option<InputId> {
        let k = self.model.net.elements.get(element)?.friction?;
        match self.model.net.friction[k].law {
            crate::elements::FrictionLaw::Normal { signal, .. }
                if matches!(self.model.signals[signal], Signal::Input { .. }) =>
            {
                Some(InputId(signal))
            }
            _ => None,
        }
    }

    /// The value of the input behind `id` now (see [`Simulation::input_id`]): what was last
    /// written, or its start value; along a ramp ([`Simulation::set_input_ramp_id`]) the value
    /// it started from. 0 for a handle that is not an input.
    pub fn input_value(&self, id: InputId) -> f64 {
        match self.model.signals.get(id.0) {
            Some(Signal::Input { value, .. }) => *value,
            _ => 0.0,
        }
    }

    /// Sets the input behind `id` (see [`Simulation::input_id`]); the same input policy as
    /// [`Simulation::set_input`].
    #[inline]
    pub fn set_input_id(&mut self, id: InputId, value: f64) -> Result<(), InputError> {
        self.set_input_ramp_id(id, value, 0.0)
    }

    /// Sets the input behind `id` to `value` now, changing at `rate` (units per second) from
    /// now on: a first-order hold, so that a prescribed speed carries its acceleration into the
    /// step (the torque that accelerates what it drives). The value follows the input policy
    /// of [`Simulation::set_input`]; a rate past +-`SIGNAL * FREQUENCY`
    /// ([`limits`](crate::limits)) is clamped to it, a NaN rate refused.
    #[inline]
    pub fn set_input_ramp_id(&mut self, id: InputId, value: f64, rate: f64) -> Result<(), InputError> {
        // Controllers write most inputs every step unchanged: that answer stays inline, read
        // from the dense copy of the inputs' values (a few lines, not each input's signal
        // among the others). A NaN never compares equal, so it takes the checked path below,
        // as does a signal that is no input (its copy is NaN).
        let slot = self.model.input_slot[id.0] as usize;
        if let Some(&[v, r, since]) = self.inputs.mirror.get(slot)
            && v == value
            && r == rate
            && (rate == 0.0 || since == self.t)
        {
            return Ok(());
        }
        self.change_input(id, value, rate)
    }

    /// Signal `k`'s value now (`None` past the signals): a whole input's from the inputs' dense
    /// copy, to the bit what [`Signal::eval`] gives (the same `input_at`), without reading the
    /// signal's own line; any other signal evaluated.
    #[inline(always)]
    pub(super) fn signal_now(&self, k: usize) -> Option<f64> {
        let slot = *self.model.input_slot.get(k)?;
        if let Some(&[value, rate, since]) = self.inputs.mirror.get(slot as usize)
            && !value.is_nan()
        {
            return Some(crate::signal::input_at(value, rate, since, self.t));
        }
        self.model.signals.get(k).map(|s| s.eval(self.t))
    }

    /// Copies every whole input's value, rate and start into [`InputSteps::mirror`] (NaN for a
    /// signal in an input's place that is no longer one): after any change of the signals
    /// other than [`Simulation::change_input`]'s, which keeps its input's copy itself.
    pub(super) fn mirror_inputs(&mut self) {
        let mirror = &mut self.inputs.mirror;
        mirror.clear();
        for (s, &slot) in self.model.signals.iter().zip(&self.model.input_slot) {
            if slot != u32::MAX {
                mirror.push(match s {
                    Signal::Input { value, rate, since, .. } => [*value, *rate, *since],
                    _ => [f64::NAN; 3],
                });
            }
        }
    }

    /// [`Simulation::set_input_ramp_id`] for a value that may differ from the present one.
    #[inline(never)]
    pub(super) fn change_input(&mut self, id: InputId, value: f64, rate: f64) -> Result<(), InputError> {
        let now = self.t;
        // (The value now, a ramp's included: what a step starts from.)
        let before = self.model.signals[id.0].eval(now);
        let k = self.model.signal_name.get(id.0).copied().unwrap_or(u32::MAX) as usize;
        let max_rate = crate::limits::SIGNAL * crate::limits::FREQUENCY;
        let (value, rate) = match (self.inputs.policy.filter(k, value, before), rate.is_nan()) {
            (Some(v), false) => (v, rate.clamp(-max_rate, max_rate)),
            (v, _) => {
                let name = self.model.input_names.get(k).cloned().unwrap_or_default();
                return Err(InputError::NotFinite { name, value: if v.is_none() { value } else { rate } });
            }
        };
        match &mut self.model.signals[id.0] {
            Signal::Input { value: v, rate: r, since, .. } => {
                if *v != value || *r != rate || (rate != 0.0 && *since != now) {
                    // A step of the value now is recorded for the stage predictor.
                    if before != value {
                        record_input_step(&mut self.inputs.steps, &mut self.inputs.step_pos, id.0, before, value);
                    }
                    let steadiness_changed = (*r == 0.0) != (rate == 0.0);
                    *v = value;
                    *r = rate;
                    *since = now;
                    if let Some(m) = self.inputs.mirror.get_mut(self.model.input_slot[id.0] as usize) {
                        *m = [value, rate, now];
                    }
                    self.inputs.changed = true;
                    // An input by id is a whole signal that no other signal contains: the
                    // buffers stay valid with its new value patched in (a ramp is unsteady and
                    // evaluated at every fill anyway).
                    self.signals.generation += 1;
                    if steadiness_changed {
                        self.count_unsteady();
                    }
                    self.capacities.stale = match self.capacities.stale {
                        Some(m) if !steadiness_changed && self.signals.unsteady.is_empty() => {
                            Some(m | self.model.readers[id.0])
                        }
                        _ => None,
                    };
                    if rate == 0.0 {
                        let k = id.0;
                        for (b, buf) in self.ws.signal_buffers().into_iter().enumerate() {
                            if self.signals.filled[b] == self.signals.buffer_generation {
                                buf[k] = value;
                            }
                        }
                    }
                }
                Ok(())
            }
            _ => Err(InputError::Unknown(format!("input #{}", id.0))),
        }
    }

    /// The change of the reduced stage forces at the step start from the input steps recorded
    /// since the last step, into `ws.stage_g` (stage `j` at `j m..`): a sliding friction element
    /// whose torque is proportional to a stepped signal
    /// ([`FrictionLaw::torque_signal`](crate::elements::FrictionLaw::torque_signal): clutch and
    /// brake normal forces, tyre loads) changes its last stage torques by the ratio of the
    /// values, a law its force at the step start ([`Law::signal_step`]: sources, engine
    /// throttles). A ramping input's change over the step is in the stage signals already;
    /// only a jump of its value is followed. False, with `ws.stage_g` left as it was or zero, when no
    /// step changes a force.
    pub(super) fn input_step_forces(&mut self, slot: usize) -> bool {
        // (Most steps step only signals nothing here follows, the load of a rolling tyre whose
        // force is a constraint torque: their record is empty.)
        self.input_changes();
        if self.inputs.changes.is_empty() {
            return false;
        }
        let n = self.model.n_dof;
        let s = &self.slots[slot];
        let m = s.m;
        let Work { fric_tau, stage_g: gq, .. } = &mut self.ws;
        // g_j = N^T dF_j, formed node by node (ground nodes carry no coordinate).
        let (g0, g1) = gq[..2 * m].split_at_mut(m);
        g0.fill(0.0);
        g1.fill(0.0);
        // Both stages at once: each sum still adds its terms in the order of the changes.
        let mut add = |node: usize, v0: f64, v1: f64| {
            if node < n {
                for &(_, a, na) in &s.basis.nz[s.basis.nz_row[node] as usize..s.basis.nz_row[node + 1] as usize] {
                    g0[a as usize] += na * v0;
                    g1[a as usize] += na * v1;
                }
            }
        };
        for &change in self.inputs.changes.iter() {
            match change {
                InputStepChange::Law(a, b, d) => {
                    add(a, d, d);
                    add(b, -d, -d);
                }
                InputStepChange::Friction(i, ratio) => {
                    // The element's force is -tau row^T.
                    let (d0, d1) = (-fric_tau[0][i] * ratio, -fric_tau[1][i] * ratio);
                    for &(node, c) in self.model.net.friction[i].row.entries.iter().take_while(|e| e.1 != 0.0) {
                        add(node, c * d0, c * d1);
                    }
                }
            }
        }
        true
    }

    /// Forms (once per step) the force change of every input step recorded since the last
    /// step, in the order of the steps, into `input_changes`: a law whose torque steps
    /// ([`Law::signal_step`]: sources, engine throttles) and a sliding friction element whose
    /// torque is proportional to the stepped signal
    /// ([`FrictionLaw::torque_signal`](crate::elements::FrictionLaw::torque_signal): clutch and
    /// brake normal forces, tyre loads), by the ratio `to / from - 1` of its change. Returns
    /// true when every stepped input's force change is in the record (false when a law that
    /// reads one has no `signal_step`, or a sliding element reads one from zero or through
    /// another signal).
    pub(super) fn input_changes(&mut self) -> bool {
        match self.inputs.changes_ready {
            ChangeRecord::NotFormed => {}
            ChangeRecord::Partial => return false,
            ChangeRecord::Complete => return true,
        }
        self.inputs.changes.clear();
        let mut known = true;
        for &(k, from, to) in self.inputs.steps.iter() {
            let k = k as usize;
            let (l0, l1) = (self.model.input_law_start[k] as usize, self.model.input_law_start[k + 1] as usize);
            for &l in &self.model.input_laws[l0..l1] {
                match self.model.net.laws[l as usize].signal_step(k, from, to, &self.w) {
                    Some((a, b, d)) => self.inputs.changes.push(InputStepChange::Law(a, b, d)),
                    None => known = false,
                }
            }
            // (A sliding element's torque is proportional to a positive signal; inputs are
            // finite.)
            let sliding = self.model.readers[k] & self.friction.sliding;
            if from <= 0.0 {
                known &= sliding == 0;
                continue;
            }
            let ratio = to.max(0.0) / from - 1.0;
            for i in bits(sliding) {
                if self.model.net.friction[i].law.torque_signal() == Some(k) {
                    self.inputs.changes.push(InputStepChange::Friction(i, ratio));
                } else {
                    known = false;
                }
            }
        }
        self.inputs.changes_ready = if known { ChangeRecord::Complete } else { ChangeRecord::Partial };
        known
    }
}

/// How far this step's record of input force changes ([`Simulation::input_changes`]) is formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ChangeRecord {
    /// Not formed yet this step.
    NotFormed,
    /// Formed, but some stepped input's force change is not in it.
    Partial,
    /// Formed, with every stepped input's force change.
    Complete,
}

/// The inputs that stepped since the last step and the force changes they make, for the start-of-
/// step lock test and the stage predictor.
#[derive(Debug, Clone)]
pub(super) struct InputSteps {
    /// An input changed since the last step: re-resolve modes at the next step start.
    pub(super) changed: bool,
    /// The inputs that stepped since the last step, set by id or by name as a whole signal:
    /// `(signal, value before, value now)` at the step start, for the stage predictor
    /// ([`Simulation::input_step_forces`]). An input inside another signal is not followed.
    /// The force changes of `input_steps` ([`Simulation::input_changes`]), formed once per step
    /// by the first reader (the start-of-step lock test or the stage predictor).
    pub(super) changes: CapVec<InputStepChange>,
    /// How far `input_changes` holds this step's record.
    pub(super) changes_ready: ChangeRecord,
    pub(super) steps: CapVec<(u32, f64, f64)>,
    /// Per signal, the position of its step in `input_steps` (`u32::MAX`: none).
    pub(super) step_pos: Vec<u32>,
    /// The next sub-step is the first since input steps: its predictor follows them.
    pub(super) jump: bool,
    /// The run-time input policy.
    pub(super) policy: InputPolicy,
    /// Each whole input's `[value, rate, since]` as its signal holds them, dense (in
    /// `Derived::input_slot` order), so that the controllers' writes of unchanged inputs read a
    /// few lines instead of each input's signal: kept equal to the signals to the bit
    /// ([`Simulation::mirror_inputs`]).
    pub(super) mirror: Vec<[f64; 3]>,
}

impl InputSteps {
    /// No steps recorded, with room for one step for each of `ns` signals and `nchanges` force
    /// changes, and a policy for `ninputs` input names.
    pub(super) fn new(ns: usize, ninputs: usize, nchanges: usize) -> Self {
        InputSteps {
            changed: false,
            changes: CapVec::new(nchanges),
            changes_ready: ChangeRecord::NotFormed,
            steps: CapVec::new(ns),
            step_pos: vec![u32::MAX; ns],
            jump: false,
            policy: InputPolicy::new(ninputs),
            mirror: Vec::with_capacity(ns),
        }
    }
}

/// The run-time input policy's state: which inputs are in a rejection episode, and the
/// rejections raised since the last step. (The input names are the network's, shared:
/// `Derived::input_names`.)
#[derive(Debug, Clone)]
pub(super) struct InputPolicy {
    /// Per input name, whether its last value was rejected (an episode is open).
    pub(super) rejecting: Vec<bool>,
    /// The rejections raised since the last step began (one per input at most).
    pub(super) raised: CapVec<InputRejected>,
    /// `raised` belongs to an earlier step: cleared at the next rejection or step.
    pub(super) stale: bool,
}

impl InputPolicy {
    fn new(n: usize) -> Self {
        InputPolicy { rejecting: vec![false; n], raised: CapVec::new(n), stale: false }
    }

    /// The input names of `signals`, each once, and per signal that is a whole input its
    /// name's index (`u32::MAX`: not an input).
    pub(super) fn names_of(signals: &[Signal]) -> (Vec<String>, Vec<u32>) {
        let mut names = Vec::new();
        signals.iter().for_each(|s| s.input_names(&mut names));
        let signal_name = signals
            .iter()
            .map(|s| match s {
                Signal::Input { name, .. } => names.iter().position(|n| n == name).map_or(u32::MAX, |k| k as u32),
                _ => u32::MAX,
            })
            .collect();
        (names, signal_name)
    }

    /// Applies the policy to `value` for input `k`: the value to use (`None`: keep the last
    /// valid one), raising a rejection once per episode.
    pub(super) fn filter(&mut self, k: usize, value: f64, last: f64) -> Option<f64> {
        let used = if value.is_nan() { None } else { Some(value.clamp(-crate::limits::SIGNAL, crate::limits::SIGNAL)) };
        let rejected = used != Some(value);
        if let Some(open) = self.rejecting.get_mut(k) {
            if rejected && !*open {
                if self.stale {
                    self.raised.clear();
                    self.stale = false;
                }
                if self.raised.has_room() {
                    self.raised.push(InputRejected { input: k, value, used: used.unwrap_or(last) });
                }
            }
            *open = rejected;
        }
        used
    }

    /// At a step's start: what was raised before it stays readable until the next step.
    pub(super) fn step_started(&mut self) {
        if self.stale {
            self.raised.clear();
        }
        self.stale = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the inputs' dense copy holds, to the bit, what a fresh copy of the signals now
    /// holds (the upkeep of each write path against the one rebuild).
    fn mirrored(sim: &Simulation) -> bool {
        let mut fresh = sim.clone();
        fresh.mirror_inputs();
        let bits = |m: &[[f64; 3]]| m.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>();
        bits(&fresh.inputs.mirror) == bits(&sim.inputs.mirror)
    }

    /// The copy follows the controllers' writes (by id, with ramps), writes by name, a
    /// restored snapshot and a parameter update, over a drive of the 8HP sedan.
    #[test]
    fn the_inputs_dense_copy_follows_every_write() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/vehicles/sedan_8hp.ron");
        let mut car = crate::Vehicle::load(&path).expect("the sedan loads");
        assert!(mirrored(car.simulation()), "as built");
        let input = crate::DriverInput { throttle: 0.6, ..Default::default() };
        let snap = car.snapshot();
        for k in 0..600 {
            car.step(&input, 1e-3).expect("the step");
            if k % 50 == 0 {
                assert!(mirrored(car.simulation()), "after step {k}");
            }
        }
        car.restore(&snap).expect("the snapshot restores");
        assert!(mirrored(car.simulation()), "after a restore");
        let spec = car.layout().spec.clone();
        car.update_parameters(&spec).expect("the same parameters");
        assert!(mirrored(car.simulation()), "after a parameter update");
        let net = crate::Network::build(&spec).expect("the sedan's network");
        let sim = &mut Simulation::with_parameters(net, crate::IntegrationParameters::vehicle());
        let name = sim.input_names()[0].clone();
        sim.set_input(&name, 0.25).expect("a known input");
        assert!(mirrored(sim), "after a write by name");
        let id = (0..sim.model.signals.len())
            .map(InputId::of_signal)
            .find(|&id| sim.model.input_slot[id.0] != u32::MAX)
            .expect("a whole input");
        sim.set_input_ramp_id(id, 0.5, 2.0).expect("a finite ramp");
        assert!(mirrored(sim), "after a ramp by id");
        sim.set_input_ramp_id(id, 0.5, 2.0).expect("the same ramp");
        assert!(mirrored(sim), "after the same ramp again");
        sim.step(1e-3).expect("the step");
        assert!(mirrored(sim), "after a step along the ramp");
        for k in 0..sim.model.signals.len() {
            let eval = sim.model.signals[k].eval(sim.t);
            assert_eq!(sim.signal_now(k).map(f64::to_bits), Some(eval.to_bits()), "signal {k}");
        }
        assert_eq!(sim.signal_now(sim.model.signals.len()), None);
    }
}
