//! Outputs: element torques, speeds, modes and the energy ledger, read after a step.

use super::*;

/// Where an element's reported mode comes from.
#[derive(Debug, Clone, Copy)]
pub(super) enum ModeSource {
    /// No mode (inertias, springs, sources...).
    None,
    /// Friction element `k`.
    Friction(usize),
    /// Kinematic clutch `j`.
    Kinematic(usize),
    /// A LossyGear without losses: an ideal gear, MSL mode 2 (free).
    Ideal,
    /// Elastic clutch law `k`.
    Law(usize),
}
/// What [`Simulation::for_each_element_output`] reads for an element that is not a body and
/// reports something: its index, relative-coordinate row, mode source and engagement signal.
#[derive(Debug, Clone, Copy)]
pub(super) struct CouplingOutput {
    /// The element's index.
    element: u32,
    /// Its normalised normal-force signal (`u32::MAX`: none, not a clutch or brake).
    engagement: u32,
    /// Where its mode comes from.
    source: ModeSource,
    /// Its relative-coordinate row, if it has one.
    rel: Option<Row>,
}

impl CouplingOutput {
    /// The records of `net`'s elements that are not bodies and have a relative coordinate or
    /// an engagement, in element order, from the elements' mode sources and engagement signals
    /// (as [`Derived`] holds them).
    pub(super) fn of(net: &Network, sources: &[ModeSource], engagements: &[Option<u32>]) -> Vec<Self> {
        net.elements
            .iter()
            .enumerate()
            .filter(|(_, e)| e.body.is_none())
            .filter_map(|(k, e)| {
                let engagement = engagements[k];
                (e.rel.is_some() || engagement.is_some()).then(|| CouplingOutput {
                    element: k as u32,
                    engagement: engagement.unwrap_or(u32::MAX),
                    source: sources[k],
                    rel: e.rel,
                })
            })
            .collect()
    }
}

/// What one element shows after a step ([`Simulation::element_outputs`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ElementOutputs {
    /// An Inertia or Mass: its angle, rad (m), and speed, rad/s (m/s).
    Body {
        /// Angle, rad (m).
        angle: f64,
        /// Speed, rad/s (m/s).
        speed: f64,
    },
    /// Any other element.
    Coupling {
        /// Its relative coordinate's state, torque, mode and dissipation, if it has a relative
        /// coordinate.
        relative: Option<RelativeOutputs>,
        /// A clutch's or brake's normalised normal force now ([`Simulation::element_engagement`]).
        engagement: Option<f64>,
    },
}

/// An element's relative state after a step ([`ElementOutputs::Coupling`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RelativeOutputs {
    /// Relative angle, rad (m).
    pub phi_rel: f64,
    /// Relative speed, rad/s (m/s).
    pub w_rel: f64,
    /// Torque (MSL convention), N m (N).
    pub torque: f64,
    /// Mode ([`Simulation::element_mode`]).
    pub mode: Option<FrictionMode>,
    /// Power turned into heat, W.
    pub dissipation: f64,
}

/// One element's outputs other than a body's, read when asked
/// ([`Simulation::for_each_output`]): each method reads what
/// [`Simulation::element_outputs`] reports for the element, to the bit, and nothing is read
/// before it is asked for.
#[derive(Clone, Copy)]
pub struct CouplingReading<'a> {
    sim: &'a Simulation,
    rec: &'a CouplingOutput,
    phi: &'a [f64],
    w: &'a [f64],
    tau: &'a [f64],
    power: &'a [f64],
}

impl CouplingReading<'_> {
    /// The element's index.
    #[inline(always)]
    pub fn element(&self) -> usize {
        self.rec.element as usize
    }

    /// Its relative state, torque, mode and dissipation, if it has a relative coordinate
    /// ([`ElementOutputs::Coupling`]'s `relative`).
    #[inline(always)]
    pub fn relative(&self) -> Option<RelativeOutputs> {
        let k = self.element();
        // (No closure: `map`'s was called out of line here.)
        let r = self.rec.rel.as_ref()?;
        let [phi_rel, w_rel] = r.dot_n([self.phi, self.w]);
        Some(RelativeOutputs {
            phi_rel,
            w_rel,
            torque: self.tau[k],
            mode: self.sim.mode_of(self.rec.source),
            dissipation: self.power[k],
        })
    }

    /// A clutch's or brake's normalised normal force now, if it is one
    /// ([`ElementOutputs::Coupling`]'s `engagement`).
    #[inline(always)]
    pub fn engagement(&self) -> Option<f64> {
        self.sim.signal_now(self.rec.engagement as usize)
    }
}

impl Simulation {
    /// The network being simulated, shared with every simulation of an equal network (the
    /// same description, run-time input values aside). Its signals' run-time input values are
    /// left out (0): the values now are this simulation's ([`Simulation::signals`]).
    pub fn network(&self) -> &Network {
        &self.model.net
    }

    /// The signals the network's laws read by index, with this simulation's run-time input
    /// values, integrals and filter states.
    pub fn signals(&self) -> &[crate::Signal] {
        &self.model.signals
    }

    /// Current time, s.
    pub fn time(&self) -> f64 {
        self.t
    }

    /// Node angles (free coordinates first, then grounds), rad or m.
    pub fn angles(&self) -> &[f64] {
        &self.phi
    }

    /// Node speeds, rad/s or m/s.
    pub fn speeds(&self) -> &[f64] {
        &self.w
    }

    /// Mode of each friction element (index into `network().friction`).
    pub fn friction_modes(&self) -> &[FrictionMode] {
        &self.modes
    }

    /// Mode changes located during the last step, in time order.
    pub fn events(&self) -> &[ModeEvent] {
        &self.events
    }

    /// Solver counters.
    pub fn stats(&self) -> StepStats {
        self.stats
    }

    /// True when this simulation and `other` share one copy of their compiled modes: they
    /// simulate equal networks (the same description, input values aside), as the vehicles of
    /// one file do. Sharing changes no result (see the [`Simulation`] docs, "Memory").
    pub fn shares_compiled_modes_with(&self, other: &Simulation) -> bool {
        Arc::ptr_eq(&self.model.modes, &other.model.modes)
    }

    /// Turns the energy ledger on or off ([`IntegrationParameters::track_energy`]). Turned on,
    /// it starts over from the present state and books the steps taken from then on.
    pub fn set_track_energy(&mut self, on: bool) {
        if on && !self.params.track_energy {
            self.restart_ledger();
        }
        self.params.track_energy = on;
    }

    /// The energy ledger, or `None` while it is not tracked
    /// ([`IntegrationParameters::track_energy`], [`Simulation::set_track_energy`]).
    pub fn energy(&self) -> Option<EnergyLedger> {
        // The kinetic energy is a function of the speeds alone: computed when asked.
        self.params.track_energy.then(|| EnergyLedger { kinetic: self.kinetic_energy(), ..self.energy })
    }

    /// Element torque at the last step end (MSL `tau` / `flange_b.tau` convention), N m.
    pub fn element_torque(&self, element: usize) -> f64 {
        self.out_tau[element]
    }

    /// Power the element turns into heat at the last step end, W (dampers, sliding friction,
    /// gear losses, backlash damping, an engaging kinematic clutch); 0 for lossless elements.
    pub fn element_dissipation(&self, element: usize) -> f64 {
        self.out_power[element]
    }

    /// The normalised normal force `u` of a clutch or brake now (its `f_normalized` signal at
    /// the present time; 0 open, 1 fully applied), `None` for other elements.
    pub fn element_engagement(&self, element: usize) -> Option<f64> {
        let signal = (*self.model.out_engagement.get(element)?)?;
        self.signal_now(signal as usize)
    }

    /// Everything a part of element `element` shows after a step, read in one go (what
    /// [`Simulation::body_state`], [`Simulation::element_relative`], [`Simulation::element_torque`],
    /// [`Simulation::element_mode`], [`Simulation::element_dissipation`] and
    /// [`Simulation::element_engagement`] give, the same values to the bit). A fleet's part
    /// writes read some fifty elements a vehicle each step: here the element's entries are
    /// looked up once. `None` for an element index out of range.
    #[inline]
    pub fn element_outputs(&self, element: usize) -> Option<ElementOutputs> {
        let model = &*self.model;
        if let Some(k) = *model.out_body.get(element)? {
            return Some(ElementOutputs::Body { angle: self.phi[k as usize], speed: self.w[k as usize] });
        }
        let relative = model.out_rel[element].map(|r| {
            let [phi_rel, w_rel] = r.dot_n([&self.phi, &self.w]);
            RelativeOutputs {
                phi_rel,
                w_rel,
                torque: self.out_tau[element],
                mode: self.element_mode(element),
                dissipation: self.out_power[element],
            }
        });
        let engagement = model.out_engagement[element].and_then(|signal| self.signal_now(signal as usize));
        Some(ElementOutputs::Coupling { relative, engagement })
    }

    /// [`Simulation::element_outputs`] of every element that reports something (the same
    /// values to the bit): `body(element, angle, speed)` for each Inertia or Mass, in index
    /// order; then `coupling(element, relative, engagement)` for each other element with a
    /// relative coordinate or an engagement, in index order (an element with neither, a torque
    /// source say, is left out). A fleet's part writes read all of a vehicle's elements after
    /// each of its steps: here they go down two lists made when the network was compiled (the
    /// bodies' nodes; each other element's row, mode source and engagement signal in one
    /// record), shared by the simulations of one network, and each closure is inlined where it
    /// is called (no call and no returned value in memory per element). `tests/vehicle.rs`
    /// holds the pass equal to `element_outputs`.
    #[inline(always)]
    pub fn for_each_element_output(
        &self,
        body: impl FnMut(usize, f64, f64),
        mut coupling: impl FnMut(usize, Option<RelativeOutputs>, Option<f64>),
    ) {
        self.for_each_output(body, |c| coupling(c.element(), c.relative(), c.engagement()));
    }

    /// [`Simulation::for_each_element_output`] with each other element's outputs read when
    /// the closure asks for them ([`CouplingReading`]): a caller that first finds where they
    /// go (a part's row) keeps no values in registers across that search, and reads nothing
    /// it has no place for.
    #[inline(always)]
    pub fn for_each_output(
        &self,
        mut body: impl FnMut(usize, f64, f64),
        mut coupling: impl FnMut(CouplingReading<'_>),
    ) {
        let model = &*self.model;
        // (Slices of one length: the check of one covers the other.)
        let m = self.phi.len().min(self.w.len());
        let (phi, w) = (&self.phi[..m], &self.w[..m]);
        for &(k, node) in &model.out_bodies {
            body(k as usize, phi[node as usize], w[node as usize]);
        }
        // (Slices of one length: one check covers both.)
        let n = self.out_tau.len().min(self.out_power.len());
        let (tau, power) = (&self.out_tau[..n], &self.out_power[..n]);
        for rec in &model.out_couplings {
            coupling(CouplingReading { sim: self, rec, phi, w, tau, power });
        }
    }

    /// `(phi_rel, w_rel)` of an element with a relative coordinate.
    pub fn element_relative(&self, element: usize) -> Option<(f64, f64)> {
        self.model.out_rel[element].map(|r| {
            let [phi, w] = r.dot_n([&self.phi, &self.w]);
            (phi, w)
        })
    }

    /// The relative speed of [`Simulation::element_relative`] alone, rad/s (or m/s).
    pub fn element_relative_speed(&self, element: usize) -> Option<f64> {
        self.model.out_rel[element].map(|r| r.dot(&self.w))
    }

    /// Mode of an element if it has one: friction elements, and elastic clutches (stick = 0,
    /// slide = +-1, no limit torque = 2).
    pub fn element_mode(&self, element: usize) -> Option<FrictionMode> {
        self.mode_of(*self.model.mode_sources.get(element)?)
    }

    /// The mode an element whose mode comes from `source` reports.
    #[inline(always)]
    fn mode_of(&self, source: ModeSource) -> Option<FrictionMode> {
        match source {
            ModeSource::None => None,
            ModeSource::Friction(k) => Some(self.modes[k]),
            ModeSource::Kinematic(j) => Some(self.kin_modes[j]),
            ModeSource::Ideal => Some(FrictionMode::Free),
            ModeSource::Law(k) => self.law_mode(k),
        }
    }

    pub(super) fn law_mode(&self, k: usize) -> Option<FrictionMode> {
        let Law::ElasticClutch { limit, .. } = self.model.net.laws[k] else { return None };
        Some(match self.regimes[k].regime {
            _ if self.model.signals[limit].eval(self.t) <= 0.0 => FrictionMode::Free,
            crate::elements::Regime::SlideForward => FrictionMode::Forward,
            crate::elements::Regime::SlideBackward => FrictionMode::Backward,
            _ => FrictionMode::Stuck,
        })
    }

    /// Angle and speed of an Inertia or Mass element.
    pub fn body_state(&self, element: usize) -> Option<(f64, f64)> {
        self.model.out_body[element].map(|k| (self.phi[k as usize], self.w[k as usize]))
    }

    /// Starts the energy ledger over from the present state (signals in buffer 2).
    pub(super) fn restart_ledger(&mut self) {
        let (ke, pe) = self.kinetic_potential(2);
        self.energy = EnergyLedger { kinetic: ke, potential: pe, initial: ke + pe, ..Default::default() };
    }

    pub(super) fn kinetic_potential(&self, sig: usize) -> (f64, f64) {
        (self.kinetic_energy(), self.potential(sig))
    }

    /// Kinetic energy of the present speeds, J.
    pub(super) fn kinetic_energy(&self) -> f64 {
        let n = self.model.n_dof;
        (0..n).map(|k| 0.5 * self.model.net.mass[k] * self.w[k] * self.w[k]).sum()
    }

    /// Potential energy of the laws at the present angles under signal buffer `sig`, J.
    pub(super) fn potential(&self, sig: usize) -> f64 {
        // Laws that read the signals only store no energy.
        if self.model.laws_state_free {
            return 0.0;
        }
        self.model
            .net
            .laws
            .iter()
            .zip(&self.regimes)
            .map(|(law, st)| law.potential(&self.phi, *st, &self.ws.sig[sig]))
            .sum()
    }

    /// Recomputes telemetry torques at the current state.
    pub(super) fn update_outputs(&mut self) {
        self.sc.phi_e.copy_from_slice(&self.phi);
        self.sc.w_e.copy_from_slice(&self.w);
        self.fill_signals(2, self.t, false);
        self.constraint_torques_at_e(self.t);
        self.update_torques(false);
        if self.accel.is_some() {
            self.update_accelerations();
        }
    }

    /// Element torques from the constraint torques (`ws.lam_end` at a clean end, else `ws.lam`)
    /// and the signals in `sig[2]`. `at_end`: the state is
    /// the end of an event-free sub-step whose end caches ([`Simulation::end_torques`]) hold
    /// the torque-dependent friction torques and powers.
    #[inline(always)]
    pub(super) fn update_torques(&mut self, at_end: bool) {
        // Law torques and dissipated powers (a clean end has them from its end forces).
        self.out_power.fill(0.0);
        if at_end {
            for k in 0..self.model.net.laws.len() {
                let e = self.model.net.law_element[k];
                self.out_tau[e] = self.ws.law_tau_end[k];
                self.out_power[e] += self.ws.law_diss_end[k];
            }
        } else {
            self.ws.f.fill(0.0);
            for (k, law) in self.model.net.laws.iter().enumerate() {
                let o = law.eval(&self.phi, &self.w, &self.ws.sig[2], self.regimes[k], &mut self.ws.f, None);
                let e = self.model.net.law_element[k];
                self.out_tau[e] = o.tau;
                self.out_power[e] += o.dissipation;
            }
        }
        // Sliding torque-dependent elements: a rolling lossy gear's loss power and a slipping
        // pack's torque come from the coupled correction (a clean end has them from its end
        // forces).
        let dependent = self.model.torque_dependent & self.friction.sliding;
        if dependent != 0 && !at_end {
            let Work { f, sig, dep_tau, .. } = &mut self.ws;
            let Scratch { fric_power, dep_scratch: ls_a, .. } = &mut *self.sc;
            Self::forces(
                &self.model.net,
                &self.modes,
                self.friction.sliding,
                &self.regimes,
                &self.phi,
                &self.w,
                &sig[2],
                f,
                Record::Nothing,
            );
            let s = &self.slots[self.cur];
            Self::torque_dependent_correct(
                &self.model.net,
                s,
                &self.modes,
                dependent,
                &self.w,
                f,
                ls_a,
                dep_tau,
                Some(&mut fric_power[0]),
            );
            self.ws.cached.remove(Cached::STAGE_FORCES);
        }
        // The constraint torques of the active rows at this state.
        let lam = if at_end { &self.ws.lam_end } else { &self.ws.lam };
        // Permanent rows: gears report flange_b.tau (node b receives -ratio lambda =
        // -flange_b.tau), speed sources the torque they apply to their flange.
        for &(ri, e, c) in &self.model.row_outputs {
            self.out_tau[e] = c * lam[ri];
        }
        // Engaged kinematic clutches carry their constraint torque.
        let s = &self.slots[self.cur];
        for (p, &j) in s.kin.iter().enumerate() {
            let ri = self.model.net.rows.len() + s.locked.len() + p;
            let kc = &self.model.net.kinematic[j];
            self.out_tau[kc.element] = -lam[ri];
            // Work rho lambda is delivered to the bodies; its negative is dissipated.
            self.out_power[kc.element] = -self.ws.sig[2][kc.rho_signal] * lam[ri];
        }
        // Friction elements: stuck ones carry their lock's constraint torque, free ones none,
        // sliding ones their kinetic torque (a LossyGear reports the gear's flange_b torque,
        // set above, and its loss power).
        let np = self.model.net.rows.len();
        for (pos, &i) in s.locked.iter().enumerate() {
            let fe = &self.model.net.friction[i];
            if self.model.lossy & 1 << i == 0 {
                self.out_tau[fe.element] = -lam[np + pos];
            }
        }
        // Free elements carry nothing: written when they become free (until then `out_tau`
        // holds their zero), a LossyGear's power at every update.
        let free = self.friction.free;
        for i in bits(free & !self.friction.out_free | free & self.model.lossy) {
            let fe = &self.model.net.friction[i];
            if self.model.lossy & 1 << i == 0 {
                self.out_tau[fe.element] = 0.0;
            }
        }
        self.friction.out_free = free;
        for i in bits(self.friction.sliding) {
            let fe = &self.model.net.friction[i];
            let lossy = self.model.lossy & 1 << i != 0;
            let mode = self.modes[i];
            let (tau, power) = if dependent & 1 << i != 0 {
                // The coupled correction's pack torque, or a rolling lossy gear's loss power.
                let (dep_tau, fric_power) = if at_end {
                    (&self.ws.dep_tau_end, &self.ws.fric_power_end)
                } else {
                    (&self.ws.dep_tau, &self.sc.fric_power[0])
                };
                if lossy { (0.0, fric_power[i]) } else { (dep_tau[i], dep_tau[i] * fe.row.dot(&self.w)) }
            } else if at_end {
                // The end forces' torque and power (same operands, same values).
                (self.ws.fric_tau_end[i], self.ws.fric_power_end[i])
            } else {
                let tau = mode.dir() * fe.law.kinetic_torque(&self.ws.sig[2], fe.row.dot(&self.w).abs(), &self.w);
                (tau, tau * fe.row.dot(&self.w))
            };
            if !lossy {
                self.out_tau[fe.element] = tau;
            }
            // (Added: a gearbox's elasticity has dissipated into it already.)
            self.out_power[fe.element] += power;
        }
        // The ledger's kinetic energy is computed when it is read.
        // (Laws that read the signals only store no energy; without the ledger nothing reads it.)
        if self.params.track_energy {
            self.energy.potential = if self.model.laws_state_free { 0.0 } else { self.potential(2) };
        }
    }
}
