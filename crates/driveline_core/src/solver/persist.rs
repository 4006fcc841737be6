//! The solver's part of a snapshot ([`crate::VehicleSnapshot`]): what the next step depends on.
//!
//! Saved: the clock, angles, speeds, friction modes, law regimes and kinematic clutches; the
//! run-time inputs and the input steps not yet taken; the stage predictor and the kept Newton
//! Jacobian of the current mode (a nonlinear mode reuses them across steps, so they shape the
//! next iterate's last bits); the complementarity warm start; the last sub-step's forces,
//! torques and signal values the next one reads; the ledger, counters and outputs; the thermal
//! network's temperatures, flows and heat ledger (its temperature inputs are run-time inputs).
//!
//! Not saved, because the description and the saved state determine them: the compiled modes
//! (the current one is compiled on restore if this simulation does not hold it), the signal
//! cache, the time-only kernel and the cached capacities, all marked stale on restore (a new
//! epoch), so they are derived again as the first step after the snapshot derived them.

use super::*;
use crate::elements::{Capacity, LawState, Regime};
use crate::snapshot::{Persist, SnapshotError, StateReader, StateWriter, persist_enum, persist_fields};

persist_enum!(FrictionMode { Backward, Stuck, Forward, Free });
persist_enum!(Regime { Open, Released, Damped, Capped, Stick, SlideForward, SlideBackward });
persist_fields!(LawState { regime, anchor });
persist_fields!(Capacity { free, tau0, tau_max, one_way });
persist_fields!(StepStats {
    steps,
    substeps,
    state_events,
    mode_compiles,
    newton_failures,
    newton_iterations,
    jacobian_updates,
    zeno_guards,
    time_only_substeps,
});
persist_fields!(EnergyLedger { input, dissipated, kinetic, potential, initial });
persist_fields!(ModeEvent { time, element, from, to });
persist_fields!(InputRejected { input, value, used });
persist_fields!(inputs::InputPolicy { rejecting, raised, stale });
persist_fields!(signals::SineState { h, rot, next, sin, cos, age, amplitude, offset, start_time });

impl Default for InputRejected {
    fn default() -> Self {
        InputRejected { input: 0, value: 0.0, used: 0.0 }
    }
}

impl Default for ModeEvent {
    fn default() -> Self {
        ModeEvent { time: 0.0, element: 0, from: FrictionMode::Free, to: FrictionMode::Free }
    }
}

/// A list that grows within a capacity: its length, then its items.
impl<T: Persist + Default> Persist for CapVec<T> {
    fn save(&self, w: &mut StateWriter) {
        w.label("self.v.as_slice()");
        self.v.as_slice().save(w);
    }
    fn load(&mut self, r: &mut StateReader) -> Result<(), SnapshotError> {
        let mut len = 0usize;
        len.load(r)?;
        if len > self.cap {
            return Err(SnapshotError::Damaged("a list is longer than this vehicle's room for it"));
        }
        self.v.clear();
        for _ in 0..len {
            let mut x = T::default();
            x.load(r)?;
            self.v.push(x);
        }
        Ok(())
    }
}

persist_fields!(work::Cached { 0 });
persist_fields!(work::QpWork { warm_x, warm_state, warm_ok });
// The buffers of the last sub-step that the next one reads (the others are scratch within a
// sub-step), and the complementarity warm start.
persist_fields!(Work {
    sig,
    sig_end,
    q0,
    q,
    stage_g,
    f,
    lam,
    lam_start,
    dep_tau,
    dependent_input,
    caps,
    cached,
    f_end,
    lam_end,
    fric_tau,
    fric_power_end,
    dep_tau_end,
    law_tau_end,
    law_diss_end,
    fric_tau_end,
    qp,
});

/// Visits the value, rate and start time of every run-time input, in signal order.
fn for_each_input(
    s: &mut Signal,
    f: &mut impl FnMut(&mut f64, &mut f64, &mut f64) -> Result<(), SnapshotError>,
) -> Result<(), SnapshotError> {
    match s {
        Signal::Input { value, rate, since, .. } => f(value, rate, since),
        // An integral's and a filter's state, as an input's.
        Signal::Integral { of, value, since } => {
            f(value, &mut 0.0, since)?;
            for_each_input(of, f)
        }
        Signal::Filter { of, value, rate, since, .. } => {
            f(value, rate, since)?;
            for_each_input(of, f)
        }
        Signal::Sum(items) | Signal::Product(items) => items.iter_mut().try_for_each(|s| for_each_input(s, f)),
        Signal::OneMinus(u) | Signal::Gain(_, u) => for_each_input(u, f),
        Signal::Difference(a, b) => {
            for_each_input(a, f)?;
            for_each_input(b, f)
        }
        _ => Ok(()),
    }
}

fn each_input(s: &Signal, f: &mut impl FnMut(f64, f64, f64)) {
    match s {
        Signal::Input { value, rate, since, .. } => f(*value, *rate, *since),
        Signal::Integral { of, value, since } => {
            f(*value, 0.0, *since);
            each_input(of, f);
        }
        Signal::Filter { of, value, rate, since, .. } => {
            f(*value, *rate, *since);
            each_input(of, f);
        }
        Signal::Sum(items) | Signal::Product(items) => items.iter().for_each(|s| each_input(s, f)),
        Signal::OneMinus(u) | Signal::Gain(_, u) => each_input(u, f),
        Signal::Difference(a, b) => {
            each_input(a, f);
            each_input(b, f);
        }
        _ => {}
    }
}

/// The most mode slots a snapshot may hold (the parameter's plausible range, far above it).
const MAX_SNAPSHOT_SLOTS: usize = 4096;

impl Simulation {
    /// Writes what the next step depends on (see the module docs).
    pub(crate) fn save_state(&self, w: &mut StateWriter) {
        w.label("self.t");
        self.t.save(w);
        w.label("self.started");
        self.started.save(w);
        w.label("self.next_time_event");
        self.next_time_event.save(w);
        w.label("self.phi");
        self.phi.save(w);
        w.label("self.w");
        self.w.save(w);
        w.label("self.modes");
        self.modes.save(w);
        w.label("self.regimes");
        self.regimes.save(w);
        w.label("self.kin_engaged");
        self.kin_engaged.save(w);
        w.label("self.kin_modes");
        self.kin_modes.save(w);
        for s in &self.model.signals {
            each_input(s, &mut |v, r, since| {
                w.label("v");
                v.save(w);
                w.label("r");
                r.save(w);
                w.label("since");
                since.save(w);
            });
        }
        let inp = &self.inputs;
        w.label("(inp.changed, inp.jump)");
        (inp.changed, inp.jump).save(w);
        w.label("inp.steps");
        inp.steps.save(w);
        w.label("inp.step_pos");
        inp.step_pos.save(w);
        w.label("inp.policy");
        inp.policy.save(w);
        let fr = &self.friction;
        w.label("(fr.breaking, fr.sliding, fr.free)");
        (fr.breaking, fr.sliding, fr.free).save(w);
        w.label("(fr.out_free, fr.zero_slips)");
        (fr.out_free, fr.zero_slips).save(w);
        w.label("self.signals.time_events");
        self.signals.time_events.save(w);
        w.label("self.signals.sine_state");
        // (Only the sines' rotation state means something.)
        for &k in self.signals.sines.iter() {
            self.signals.sine_state[k as usize].save(w);
        }
        w.label("self.signals.held_value");
        self.signals.held_value.save(w);
        w.label("self.ws");
        self.ws.save(w);
        // The mode cache, slot by slot: which modes are compiled where, how recently used, the
        // limits their weighted maps were formed with, and the step their Newton factors are for.
        w.label("mode cache");
        self.clock.save(w);
        self.slots.len().save(w);
        for s in &self.slots {
            w.label("slot: valid, key, age");
            // (An empty slot's key and age mean nothing.)
            (s.valid, if s.valid { s.key } else { 0 }, if s.valid { s.age } else { 0 }).save(w);
            w.label("slot: weight caps");
            s.weight_caps[..if s.valid { s.locked.len() } else { 0 }].save(w);
            // The Jacobian of the present epoch (kept across the steps of a nonlinear mode);
            // the step a linear mode's Newton factors are for; the stiffness bound of the last
            // Jacobian (which the event search reads).
            let live = s.valid && s.jac_epoch == self.epoch && !s.newton_h.is_nan();
            w.label("slot: live");
            live.save(w);
            w.label("slot: omega2");
            s.omega2.save(w);
            w.label("slot: Newton");
            if live {
                s.newton_h.save(w);
                let set = &self.newton.sets[s.newton];
                set.dr[..s.m * s.m].save(w);
                set.kr[..s.m * s.m].save(w);
                (s.jac_stale, s.jac_uses).save(w);
            } else {
                (if s.valid && s.linear { s.newton_h } else { f64::NAN }).save(w);
            }
        }
        self.cur.save(w);
        let p = &self.pred;
        w.label("p.q0");
        p.q0.save(w);
        w.label("p.q");
        p.q.save(w);
        w.label("p.g");
        p.g.save(w);
        w.label("p.g_end");
        p.g_end.save(w);
        w.label("(p.g_ok, p.stage_g_ok, p.force_start)");
        (p.g_ok, p.stage_g_ok, p.force_start).save(w);
        w.label("(p.started_from_forces, p.newton_eta, p.h)");
        (p.started_from_forces, p.newton_eta, p.h).save(w);
        w.label("(p.slot == self.cur, p.epoch == self.epoch)");
        (p.slot == self.cur, p.epoch == self.epoch).save(w);
        w.label("self.stats");
        self.stats.save(w);
        w.label("self.energy");
        self.energy.save(w);
        w.label("self.out_tau");
        self.out_tau.save(w);
        w.label("self.out_power");
        self.out_power.save(w);
        w.label("self.events");
        self.events.save(w);
        if let Some(th) = self.thermal.as_deref() {
            w.label("thermal: t, flow, ledger");
            th.t.save(w);
            th.flow.save(w);
            let l = th.ledger;
            (l.received, l.sourced, l.released).save(w);
        }
    }

    /// Reads back what [`Simulation::save_state`] wrote, into a simulation of the same
    /// network. On an error the simulation is partly written: the caller restores a backup.
    pub(crate) fn load_state(&mut self, r: &mut StateReader) -> Result<(), SnapshotError> {
        let took = self.take_scratch();
        let loaded = self.load_state_leased(r);
        self.give_back_scratch(took);
        // (The inputs' dense copy follows the signals as loaded, a partial load included.)
        self.mirror_inputs();
        loaded
    }

    /// [`Simulation::load_state`] with the thread's scratch borrowed.
    fn load_state_leased(&mut self, r: &mut StateReader) -> Result<(), SnapshotError> {
        self.t.load(r)?;
        self.started.load(r)?;
        self.next_time_event.load(r)?;
        self.phi.load(r)?;
        self.w.load(r)?;
        self.modes.load(r)?;
        self.regimes.load(r)?;
        self.kin_engaged.load(r)?;
        self.kin_modes.load(r)?;
        for s in &mut self.model.signals {
            for_each_input(s, &mut |v, rate, since| {
                v.load(r)?;
                rate.load(r)?;
                since.load(r)
            })?;
        }
        // Whatever was derived from the signals, the modes or the epoch is stale from here.
        self.signals_changed(true);
        self.epoch += 1;
        self.capacities = CapacityCache::new();
        let inp = &mut self.inputs;
        let mut flags = (false, false);
        flags.load(r)?;
        (inp.changed, inp.jump) = flags;
        inp.steps.load(r)?;
        inp.step_pos.load(r)?;
        inp.policy.load(r)?;
        inp.changes_ready = ChangeRecord::NotFormed;
        inp.changes.clear();
        let fr = &mut self.friction;
        let mut masks = (0u64, 0u64, 0u64);
        masks.load(r)?;
        (fr.breaking, fr.sliding, fr.free) = masks;
        let mut more = (0u64, None::<u64>);
        more.load(r)?;
        (fr.out_free, fr.zero_slips) = more;
        self.signals.time_events.load(r)?;
        for &k in self.signals.sines.iter() {
            self.signals.sine_state[k as usize].load(r)?;
        }
        self.signals.held_value.load(r)?;
        let ws_at = r.clone();
        self.ws.load(r)?;
        // The mode cache as it was: each slot in its place, compiled here (with the limits the
        // original compiled it with) when this simulation does not hold it the same.
        self.clock.load(r)?;
        let mut n = 0usize;
        n.load(r)?;
        if n == 0 || n > MAX_SNAPSHOT_SLOTS {
            return Err(SnapshotError::Damaged("the mode cache has no slot, or implausibly many"));
        }
        // (A simulation saved with another slot count: the cache takes the saved one's size,
        // so that it continues as the saved one would.)
        self.resize_slots(n);
        let mut rebuilt = false;
        let mut caps = vec![0.0; self.model.net.friction.len()];
        for k in 0..n {
            let mut head = (false, 0u64, 0u64);
            head.load(r)?;
            let (valid, key, age) = head;
            let mut len = 0usize;
            len.load(r)?;
            if len > caps.len() {
                return Err(SnapshotError::Damaged("a compiled mode locks more elements than there are"));
            }
            for c in &mut caps[..len] {
                c.load(r)?;
            }
            let same = |s: &ModeSlot| {
                s.valid
                    && s.key == key
                    && s.locked.len() == len
                    && s.weight_caps[..len].iter().zip(&caps[..len]).all(|(a, b)| a.to_bits() == b.to_bits())
            };
            if valid {
                if let Some(j) = (k..n).find(|&j| same(&self.slots[j])) {
                    self.swap_slots(k, j);
                } else {
                    self.compile_with(k, key, Some(&caps[..len]));
                    rebuilt = true;
                }
                if self.slots[k].locked.len() != len {
                    return Err(SnapshotError::Damaged("a compiled mode's locks do not match its key"));
                }
            } else {
                self.slots[k].valid = false;
            }
            self.slots[k].age = age;
            // (A slot's Newton factors are those of its Dr, Kr and newton_h whenever newton_h
            // is a number: kept when all three are the snapshot's, formed again otherwise.)
            let had_h = self.slots[k].newton_h;
            let (mut live, mut omega2, mut newton_h) = (false, 0.0, 0.0);
            live.load(r)?;
            omega2.load(r)?;
            newton_h.load(r)?;
            let mm = self.slots[k].m * self.slots[k].m;
            if live && valid {
                let (mut dr, mut kr) = (vec![0.0; mm], vec![0.0; mm]);
                dr.load(r)?;
                kr.load(r)?;
                let bits = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
                // (A slot whose newton_h is a number holds a set of factors.)
                let set = self.newton_of(k);
                let s = &mut self.slots[k];
                let own = &mut self.newton.sets[set];
                let kept =
                    had_h.to_bits() == newton_h.to_bits() && bits(&own.dr[..mm], &dr) && bits(&own.kr[..mm], &kr);
                own.dr[..mm].copy_from_slice(&dr);
                own.kr[..mm].copy_from_slice(&kr);
                let mut jac = (false, 0u32);
                jac.load(r)?;
                (s.jac_stale, s.jac_uses) = jac;
                s.jac_epoch = self.epoch;
                if !kept {
                    self.factor_newton(k, newton_h, false);
                    rebuilt = true;
                }
            } else if live {
                return Err(SnapshotError::Damaged("a mode not compiled has a Jacobian"));
            } else {
                let s = &mut self.slots[k];
                s.jac_epoch = u64::MAX;
                if valid && s.linear && !newton_h.is_nan() && had_h.to_bits() != newton_h.to_bits() {
                    self.jacobians(k, 0);
                    self.factor_newton(k, newton_h, false);
                    rebuilt = true;
                } else if had_h.to_bits() != newton_h.to_bits() {
                    s.newton_h = f64::NAN;
                }
            }
            self.slots[k].omega2 = omega2;
        }
        self.cur.load(r)?;
        if self.cur >= n || !self.slots[self.cur].valid {
            return Err(SnapshotError::Damaged("the current mode is not compiled"));
        }
        let p = &mut self.pred;
        p.q0.load(r)?;
        p.q.load(r)?;
        p.g.load(r)?;
        p.g_end.load(r)?;
        let mut flags = (false, false, false);
        flags.load(r)?;
        (p.g_ok, p.stage_g_ok, p.force_start) = flags;
        let mut more = (false, 0.0, 0.0);
        more.load(r)?;
        (p.started_from_forces, p.newton_eta, p.h) = more;
        let mut same = (false, false);
        same.load(r)?;
        p.slot = if same.0 { self.cur } else { usize::MAX };
        p.epoch = if same.1 { self.epoch } else { u64::MAX };
        if rebuilt {
            // (Compiling and forming Jacobians used the workspace.)
            self.ws.load(&mut ws_at.clone())?;
        }
        self.stats.load(r)?;
        self.energy.load(r)?;
        self.out_tau.load(r)?;
        self.out_power.load(r)?;
        self.events.load(r)?;
        if let Some(th) = self.thermal.as_deref_mut() {
            th.t.load(r)?;
            th.flow.load(r)?;
            let l = &mut th.ledger;
            let mut x = (0.0, 0.0, 0.0);
            x.load(r)?;
            (l.received, l.sourced, l.released) = x;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::snapshot::{StateReader, StateWriter};
    use crate::{IntegrationParameters, Scenario, Simulation};

    /// A state saved by a simulation with one mode-slot count restores into one with another
    /// and continues bit for bit as the saved one does: the cache takes the saved size, and
    /// which slot holds which mode changes no result. CoupledClutches at 1 ms, saved at 0.9 s
    /// (its clutches have locked and slipped), 32 slots into 3 and into 40.
    #[test]
    fn a_state_restores_into_a_simulation_with_another_slot_count() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/scenarios/msl/CoupledClutches.ron");
        let (_, net) = Scenario::load_network(&path).expect("shipped scenario");
        let with = |slots| IntegrationParameters { mode_cache_slots: slots, ..IntegrationParameters::default() };
        let mut saved = Simulation::with_parameters(net.clone(), with(32));
        for _ in 0..900 {
            saved.step(1e-3).unwrap();
        }
        let mut w = StateWriter::with_capacity(0);
        saved.save_state(&mut w);
        for slots in [3, 40] {
            let mut other = Simulation::with_parameters(net.clone(), with(slots));
            other.load_state(&mut StateReader::new(&w.words)).expect("the state restores");
            let mut original = saved.clone();
            for _ in 0..1100 {
                original.step(1e-3).unwrap();
                other.step(1e-3).unwrap();
                let bits = |s: &Simulation| s.speeds().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&original), bits(&other), "at t = {} with {slots} slots", other.time());
            }
            assert!(original.stats().state_events > saved.stats().state_events, "the run on crosses mode changes");
        }
    }
}
