//! One step: sub-steps between events, the time-only kernel, the step's end.

use super::*;

/// How many times a sub-step whose Newton iteration did not converge is cut to a quarter: to
/// 4^-24 (3.6e-15) of its length, where a light body driven hard reaches its next event (a
/// 3e-12 kg m^2 planetary load thrown against a sliding brake locks 1e-13 s into a 1 ms step).
const MAX_CUTS: usize = 24;
/// Sub-steps the Zeno guard may take (each cut at most [`MAX_CUTS`] times) before the step
/// is refused: growing by four from a converged one, a guarded sub-step reaches the rest of
/// any step from 1e-15 of it in 25.
const MAX_GUARDED: usize = 4096;
/// Events at the same instant forcing the same elements, in a row, after which a sliding
/// direction the motion keeps reversing is flipped, and after which it is held.
const STALLS_TO_FLIP: u32 = 3;
/// See [`STALLS_TO_FLIP`].
const STALLS_TO_HOLD: u32 = 5;

impl Simulation {
    /// Advances the simulation by `dt` seconds.
    ///
    /// Non-finite or non-positive `dt` is rejected with an error and changes nothing.
    pub fn step(&mut self, dt: f64) -> Result<(), StepError> {
        let took = self.take_scratch();
        let r = self.step_leased(dt);
        self.give_back_scratch(took);
        r
    }

    /// [`Simulation::step`] with the thread's scratch borrowed.
    fn step_leased(&mut self, dt: f64) -> Result<(), StepError> {
        if !(dt.is_finite() && dt > 0.0) {
            return Err(StepError::BadStep(dt));
        }
        if self.t + dt == self.t {
            return Err(StepError::TooShort { dt, t: self.t });
        }
        self.events.clear();
        self.inputs.policy.step_started();
        self.stats.steps += 1;
        let max_step = self.max_step();
        if dt <= max_step {
            return self.step_piece(dt);
        }
        // A long step in equal pieces of at most `max_step` (to rounding: a step of a whole
        // number of pieces, whose quotient rounds up, is not cut into one more).
        let n = (dt / max_step * (1.0 - 1e-12)).ceil();
        if n > 1e6 {
            return Err(StepError::TooLong { dt, max_step });
        }
        let t0 = self.t;
        let n = n as usize;
        for k in 1..=n {
            let end = if k == n { t0 + dt } else { t0 + dt * (k as f64 / n as f64) };
            self.step_piece(end - self.t)?;
        }
        Ok(())
    }

    /// One step of `dt` (at most `max_step`) that keeps the events recorded so far.
    fn step_piece(&mut self, dt: f64) -> Result<(), StepError> {
        let t_end = self.t + dt;
        // A step that is one event-free sub-step of the time-only kernel (a mode whose forces
        // depend on time alone): the kernel never commits a non-finite state, so nothing needs
        // saving. Any other step, or one the kernel declines, takes the general path.
        if let Some(clean_end) = self.whole_step_in_kernel(t_end, dt) {
            self.finish_step(clean_end);
            self.after_piece(dt);
            return Ok(());
        }
        self.general_step(t_end, dt)
    }

    /// What follows a committed step piece of `dt`: the thermal step, and the integrals carried
    /// to its end (each later evaluation integrates from there).
    #[inline(always)]
    fn after_piece(&mut self, dt: f64) {
        if self.thermal.is_some() {
            self.thermal_step(dt);
        }
        if self.model.integrals {
            let t = self.t;
            for s in self.model.signals.iter_mut() {
                s.restart_integrals(t, true);
            }
        }
    }

    /// A step from `t` to `t_end` (of length `dt`) that the time-only kernel does not take in
    /// one sub-step: sub-steps between time and state events, each integrated, screened for
    /// events and committed, modes selected at each event; then what follows a committed piece
    /// ([`Simulation::after_piece`]).
    #[inline(never)]
    pub(super) fn general_step(&mut self, t_end: f64, dt: f64) -> Result<(), StepError> {
        // The state at the step start, restored if the step produces a non-finite value.
        let t_start = self.t;
        self.sc.phi_save.copy_from_slice(&self.phi);
        self.sc.singular = None;
        self.sc.w_save.copy_from_slice(&self.w);
        let energy_start = self.energy;
        if self.inputs.changed {
            self.after_input_change();
        }
        let mut substeps = 0;
        // True when the step ends on an event-free sub-step: its end caches describe the state.
        let mut clean_end = false;
        // After a cut, the longest sub-step: four times the last converged one, growing by four
        // with each sub-step that converges uncut (a stiff law met from far off, a huge torque
        // against a quadratic drag, converges on a short sub-step, then on longer ones as the
        // state settles; retrying the whole rest each time would use up `max_substeps`).
        let mut cap = f64::INFINITY;
        // Events that came with no time passing, in a row, and the elements they forced.
        let (mut stalls, mut stall_start) = (0u32, None::<(u64, u64)>);
        // A sub-step that did not converge on any cut: its mode, worst coordinate and length.
        let mut unconverged = None;
        self.friction.trust_group = false;
        self.friction.trust_locks = 0;
        while self.t < t_end {
            substeps += 1;
            clean_end = false;
            let te = self.next_time_event;
            let (target, time_event) = if te <= t_end + 1e-9 * dt { (te, true) } else { (t_end, false) };
            let h = target - self.t;
            if h <= 1e-15 * self.t.abs().max(1.0) {
                self.t = target;
                if time_event {
                    self.after_time_event();
                }
                continue;
            }
            if substeps > self.params.max_substeps {
                // The Zeno guard: the rest of the step without events, in the present modes, in
                // sub-steps that grow by four from the last converged one (`cap`); one whose
                // Newton iteration does not converge is cut as below. A sub-step that converges
                // on no cut, or more than [`MAX_GUARDED`] guarded sub-steps (a Newton iteration
                // that converges only on nanosecond sub-steps would take millions), refuse the
                // step: an unconverged iterate is never committed.
                self.stats.zeno_guards += 1;
                let (mut h, mut time_event) = if h > cap { (cap, false) } else { (h, time_event) };
                self.integrate(h, false);
                let cut = self.sc.newton_failed;
                if cut {
                    (h, time_event) = (self.cut_until_converged(h), false);
                }
                if self.sc.newton_failed || substeps > self.params.max_substeps + MAX_GUARDED {
                    unconverged = Some((self.cur, self.worst_coordinate(), h));
                    break;
                }
                cap = if cut { 4.0 * h } else { 4.0 * cap };
                self.commit(h);
                // Without event location a sliding element's slip may have passed zero within
                // the sub-step: at its end it is stuck or slides the other way, as a mode
                // selection says, rather than drive the motion on in its old direction (a
                // friction torque against the old direction is a motor for the new one).
                let passed = self.slips_not_ahead();
                if passed != 0 {
                    self.select_modes(passed, false);
                }
                if time_event {
                    self.after_time_event();
                }
                continue;
            }
            self.stats.substeps += 1;
            let (h, time_event) = if h > cap { (cap, false) } else { (h, time_event) };
            let moving = self.moving_slips();
            self.integrate(h, h >= 0.999 * dt);
            // A Newton iteration that stopped without converging is not committed: the sub-step
            // is cut to a quarter, [`MAX_CUTS`] times at most, until one converges (a stiff
            // tyre or brake near standstill at a game step); the sub-steps after it start from
            // four times the converged length (`cap`). When none converges the step is refused.
            let (mut h, mut time_event) = (h, time_event);
            let cut = self.sc.newton_failed;
            if cut {
                (h, time_event) = (self.cut_until_converged(h), false);
                if self.sc.newton_failed {
                    unconverged = Some((self.cur, self.worst_coordinate(), h));
                    break;
                }
            }
            cap = if cut { 4.0 * h } else { 4.0 * cap };
            match self.detect_event(h) {
                None => {
                    self.commit(h);
                    clean_end = self.after_clean_substep(moving, time_event);
                }
                Some((theta, forced, breaking)) => {
                    self.stats.state_events += 1;
                    let he = h * theta;
                    if he > 0.0 {
                        self.integrate(he, false);
                        if self.sc.newton_failed {
                            // The way to the event did not converge (from another start than the
                            // sub-step that found it): a quarter of it, and less, is taken
                            // instead, event-free, and the loop goes on from there.
                            let hc = self.cut_until_converged(he);
                            if self.sc.newton_failed {
                                unconverged = Some((self.cur, self.worst_coordinate(), hc));
                                break;
                            }
                            self.commit(hc);
                            clean_end = self.after_clean_substep(moving, false);
                            cap = 4.0 * hc;
                            continue;
                        }
                        self.commit(he);
                    }
                    // Events that coincide are one event: every sliding element whose slip is
                    // at zero or reversed in the state taken to the event instant crossed zero
                    // with the located one (its own root, located on the same dense output,
                    // may lie a rounding later, past the localisation tolerance; the way to
                    // the event, integrated again, lands within it). It is a stuck candidate
                    // like the located one, not taken through the opposite sliding mode first.
                    let forced = forced | self.slips_not_ahead();
                    self.friction.breaking = breaking;
                    // A sliding direction the motion reversed at once, again and again (the
                    // selection at an instant that the stage dynamics contradict: a braked
                    // tyre near standstill): after three such repeats it slides the other way,
                    // after five it is held; the step would otherwise stall into the Zeno
                    // guard. (One or two repeats are a break-away's ordinary aftermath.)
                    // The same with nothing forced (a redundant group's break-away test firing at
                    // the instant of its selection): after five repeats the group is trusted for
                    // the rest of the step; and a lock's break-away test that fires at the
                    // instant of its selection, which keeps it stuck: after five repeats the
                    // lock is trusted for the rest of the step.
                    if theta <= 1e-9 && stall_start == Some((forced, breaking)) {
                        stalls += 1;
                        let reversed = forced & self.friction.sliding;
                        if stalls == STALLS_TO_FLIP {
                            self.friction.flip = reversed;
                        } else if stalls >= STALLS_TO_HOLD {
                            self.friction.hold = reversed;
                            self.friction.trust_group |= forced == 0 && breaking == 0;
                            self.friction.trust_locks |= breaking;
                        }
                    } else {
                        stalls = 0;
                    }
                    stall_start = (theta <= 1e-9).then_some((forced, breaking));
                    self.select_modes(forced, false);
                    self.friction.breaking = 0;
                }
            }
        }
        self.t = t_end.max(self.t);
        for &(k, _, _) in self.inputs.steps.iter() {
            self.inputs.step_pos[k as usize] = u32::MAX;
        }
        self.inputs.steps.clear();
        self.inputs.changes_ready = ChangeRecord::NotFormed;
        self.inputs.jump = false;
        let n = self.model.n_dof;
        if unconverged.is_some() || !(all_finite(&self.phi[..n]) && all_finite(&self.w[..n])) {
            // Never propagate NaN, infinity or an unconverged iterate: name the bodies, go back
            // to the step start and report.
            // (A singular matrix met on the way is the cause to name; else the coordinate where
            // Newton failed worst.)
            let met_singular = self.sc.singular.take();
            let singular = met_singular.or(unconverged.map(|(slot, a, _)| (slot, a)));
            let bad: Vec<&str> = (0..self.model.net.elements.len())
                .filter(|&e| {
                    // (Along a singular system's undetermined coordinate: the bodies the
                    // null-space basis moves; and every body whose state went non-finite.)
                    let along = match (singular, self.model.out_body[e]) {
                        (Some((slot, a)), Some(k)) => self.slots[slot].basis.nmat[k as usize * n + a] != 0.0,
                        _ => false,
                    };
                    along || self.body_state(e).is_some_and(|(p, w)| !(p.is_finite() && w.is_finite()))
                })
                .map(|e| self.model.net.elements[e].name.as_str())
                .take(4)
                .collect();
            let elements = if bad.is_empty() { "the network's coordinates".to_string() } else { bad.join(", ") };
            self.phi.copy_from_slice(&self.sc.phi_save);
            self.w.copy_from_slice(&self.sc.w_save);
            // (The ledger too: the failed sub-steps booked their non-finite work in it, and the
            // heat they sent to the heat ports.)
            self.energy = energy_start;
            self.thermal_discard();
            self.t = t_start;
            self.select_modes(0, false);
            self.update_outputs();
            return Err(match (met_singular, unconverged) {
                (Some(_), _) => StepError::Singular { t: t_start, elements },
                (None, Some((_, _, h))) => StepError::NotConverged { t: t_start, h, elements },
                (None, None) => StepError::NonFinite { t: t_start, elements },
            });
        }
        self.finish_step(clean_end);
        self.after_piece(dt);
        Ok(())
    }

    /// The free coordinate of the current mode whose last Newton residual (of either stage),
    /// over its reduced inertia, is the largest: where an iteration that failed is worst.
    fn worst_coordinate(&self) -> usize {
        let s = &self.slots[self.cur];
        let m = s.m;
        let mut worst = (0, -1.0f64);
        for a in 0..m {
            let scale = s.mr[a * m + a].abs().max(f64::MIN_POSITIVE);
            let r = self.sc.res[a].abs().max(self.sc.res[m + a].abs()) / scale;
            // (NaN compares false: a NaN residual is the worst.)
            let better = r <= worst.1;
            if !better {
                worst = (a, if r.is_nan() { f64::INFINITY } else { r });
            }
        }
        worst.0
    }

    /// After a sub-step of `h` whose Newton iteration did not converge: integrates it again
    /// cut to a quarter, and again, at most [`MAX_CUTS`] times, until one converges. Returns
    /// the length of the last one integrated (converged, unless every cut failed:
    /// `ws.newton_failed` says).
    fn cut_until_converged(&mut self, mut h: f64) -> f64 {
        for _ in 0..MAX_CUTS {
            h *= 0.25;
            self.integrate(h, false);
            if !self.sc.newton_failed {
                break;
            }
        }
        h
    }

    /// The whole step from `t` to `t_end` as one sub-step of the time-only kernel, when no
    /// input changed, no time event falls in it and the kernel takes it: then committed, and
    /// whether it ended clean ([`Simulation::after_clean_substep`]); `None` with nothing
    /// changed otherwise.
    pub(super) fn whole_step_in_kernel(&mut self, t_end: f64, dt: f64) -> Option<bool> {
        let h = t_end - self.t;
        if self.inputs.changed
            || self.next_time_event <= t_end + 1e-9 * dt
            || h <= 1e-15 * self.t.abs().max(1.0)
            || self.params.max_substeps == 0
            || !self.time_only_network()
        {
            return None;
        }
        let zero_slips = self.friction.zero_slips;
        let moving = self.moving_slips();
        if !self.time_only_substep(h) {
            // The general path takes the step from the same state.
            self.friction.zero_slips = zero_slips;
            return None;
        }
        self.stats.substeps += 1;
        let clean = self.after_clean_substep(moving, false);
        self.t = t_end.max(self.t);
        Some(clean)
    }

    /// Sliding elements whose slip is non-zero now (a slip held at zero by another lock, for
    /// example a bearing friction beside a stuck lossy gear, is not "reaching" zero), as a
    /// mask; the zero slips known from the last sub-step's end are used up.
    pub(super) fn moving_slips(&mut self) -> u64 {
        !self.friction.zero_slips.take().unwrap_or_else(|| self.slips_at_zero())
    }

    /// After an event-free sub-step is committed: locks the elements whose slip reached zero
    /// exactly at its end (of those `moving` at its start) and handles a time event ending it.
    /// True when the state is the sub-step's clean end (no mode selection since).
    pub(super) fn after_clean_substep(&mut self, moving: u64, time_event: bool) -> bool {
        // (The time-only kernel found them as it committed; the general commit leaves None.)
        let zero = self.friction.zero_slips.unwrap_or_else(|| self.slips_at_zero());
        // The next sub-step starts from this state: unless a mode selection intervenes, its
        // zero slips are these.
        self.friction.zero_slips = Some(zero);
        let at_zero = zero & moving;
        if at_zero != 0 {
            self.select_modes(at_zero, false);
        }
        if time_event {
            self.after_time_event();
            return false;
        }
        at_zero == 0
    }

    /// The outputs at the end of a step: from the last sub-step's end caches when it ended
    /// clean, evaluated afresh otherwise.
    #[inline(always)]
    pub(super) fn finish_step(&mut self, clean_end: bool) {
        if clean_end {
            // (The kernel's commit leaves them valid; the call is skipped then.)
            if !self.ws.cached.has(Cached::END) {
                self.end_torques();
            }
            let Work { sig_end, sig, .. } = &mut self.ws;
            sig[2].copy_from_slice(sig_end);
            self.signals.filled[2] = self.signals.filled[3];
            self.update_torques(true);
            if self.accel.is_some() {
                self.update_accelerations();
            }
        } else {
            self.update_outputs();
        }
    }

    /// Sliding friction elements whose slip is zero (to rounding) or against their sliding
    /// direction now.
    fn slips_not_ahead(&self) -> u64 {
        if self.friction.sliding == 0 {
            return 0;
        }
        let tol = zero_slip_tolerance(speed_scale(&self.w[..self.model.n_dof]));
        let mut mask = 0;
        for i in bits(self.friction.sliding) {
            let ahead = self.model.net.friction[i].row.dot(&self.w) * self.modes[i].dir() > tol;
            if !ahead {
                mask |= 1 << i;
            }
        }
        mask
    }

    /// Sliding friction elements whose slip is zero (to rounding) now.
    pub(super) fn slips_at_zero(&self) -> u64 {
        if self.friction.sliding == 0 {
            return 0;
        }
        let tol = zero_slip_tolerance(speed_scale(&self.w[..self.model.n_dof]));
        let mut mask = 0;
        for i in bits(self.friction.sliding) {
            if self.model.net.friction[i].row.dot(&self.w).abs() <= tol {
                mask |= 1 << i;
            }
        }
        mask
    }

    pub(super) fn after_time_event(&mut self) {
        self.signals.time_events += 1;
        self.next_time_event = self.compute_next_time_event(self.t);
        // Signals may have jumped: re-evaluate backlash regimes and friction modes.
        self.select_modes(0, false);
    }
}

#[cfg(test)]
mod tests {
    use crate::elements::Law;
    use crate::{Scenario, Simulation, StepError};

    /// A sub-step whose Newton iteration converges on no cut is an error with the state and
    /// the clock as they were, never a committed iterate: a quadratic drag, allowed two Newton
    /// iterations towards a tolerance of zero (no correction of this law is exactly zero, even
    /// on the shortest cut).
    #[test]
    fn a_step_that_never_converges_is_refused_with_the_state_as_it_was() {
        let text = r#"Scenario(name: "drag", t_end: 1.0, elements: [
                (name: "J", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 10.0)),
                (name: "drag", kind: QuadraticSpeedDependentTorque(tau_nominal: -1.0, w_nominal: 1.0)),
            ], connections: [("drag.flange", "J.flange_a")])"#;
        let sc = Scenario::parse(text, "drag").expect("parses");
        let mut sim = Simulation::new(sc.build(text, "drag").expect("builds"));
        // (From the start: no earlier sub-step predicts the stages.)
        let (t, w) = (sim.time(), sim.speeds()[0]);
        sim.params.max_newton_iterations = 2;
        sim.params.newton_tolerance = 0.0;
        let err = sim.step(1e-3).expect_err("no iteration converges");
        match &err {
            StepError::NotConverged { t: t0, h, elements } => {
                assert_eq!(*t0, t);
                assert!(*h < 1e-17, "{err}");
                assert_eq!(elements, "J", "{err}");
            }
            _ => panic!("{err}"),
        }
        assert_eq!((sim.time(), sim.speeds()[0]), (t, w));
        // With the default tolerance again, the same step goes on from there.
        sim.params = crate::IntegrationParameters::default();
        sim.step(1e-3).expect("converges again");
        assert!(sim.speeds()[0] < w);
    }

    /// Simulations of one shape stepped in turn on one thread share its scratch; one whose
    /// housing is held at a non-zero angle among two at zero, each steps as it does alone, to
    /// the bit: the scratch's ground entries are rewritten whenever the last user's (or this
    /// one's) are not all `+0.0`, and kept when both are.
    #[test]
    fn housings_at_other_angles_share_a_threads_scratch_as_alone() {
        let sim = |phi0: f64, w: f64| {
            let text = format!(
                r#"Scenario(name: "held", t_end: 1.0, elements: [
                    (name: "fixed", kind: Fixed(phi0: {phi0:?})),
                    (name: "spring", kind: Spring(c: 400.0)),
                    (name: "damper", kind: Damper(d: 0.5)),
                    (name: "J", kind: Inertia(J: 0.2, phi_start: 0.0, w_start: {w:?})),
                ], connections: [("fixed.flange", "spring.flange_a"), ("spring.flange_b", "J.flange_a"),
                    ("fixed.flange", "damper.flange_a"), ("damper.flange_b", "J.flange_b")])"#
            );
            let sc = Scenario::parse(&text, "held").expect("parses");
            Simulation::new(sc.build(&text, "held").expect("builds"))
        };
        let trace = |sim: &Simulation| (sim.time().to_bits(), sim.speeds()[0].to_bits(), sim.angles()[0].to_bits());
        let cases = [(0.0, 3.0), (0.5, 0.0), (0.0, -1.0)];
        let alone: Vec<Vec<_>> = cases
            .iter()
            .map(|&(phi0, w)| {
                let mut s = sim(phi0, w);
                (0..300)
                    .map(|_| {
                        s.step(1e-3).expect("steps");
                        trace(&s)
                    })
                    .collect()
            })
            .collect();
        let mut sims: Vec<_> = cases.iter().map(|&(phi0, w)| sim(phi0, w)).collect();
        for k in 0..300 {
            for (j, s) in sims.iter_mut().enumerate() {
                s.step(1e-3).expect("steps");
                assert_eq!(trace(s), alone[j][k], "case {j}, step {k}");
            }
        }
        // (The housing's angle matters: the one held at 0.5 rad turned toward it.)
        assert!(sims[1].angles()[0] > 0.1);
    }

    /// A motion that reaches infinity inside a step (a quadratic drive, `w' = w^2` from 10 rad/s:
    /// at 0.1 s) is refused with the state and the energy ledger as they were at the step
    /// start; the ledger does not book the failed sub-steps' infinite work.
    #[test]
    fn a_refused_step_leaves_the_energy_ledger_as_it_was() {
        let text = r#"Scenario(name: "blowup", t_end: 1.0, elements: [
                (name: "J", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 10.0)),
                (name: "drive", kind: QuadraticSpeedDependentTorque(tau_nominal: 1.0, w_nominal: 1.0)),
            ], connections: [("drive.flange", "J.flange_a")])"#;
        let sc = Scenario::parse(text, "blowup").expect("parses");
        let mut sim = Simulation::new(sc.build(text, "blowup").expect("builds"));
        sim.step(0.05).expect("halfway to the blow-up");
        let (before, w) = (sim.energy().expect("tracked"), sim.speeds()[0]);
        let err = sim.step(0.1).expect_err("the motion reaches infinity");
        // (Newton fails on the last cuts before the motion reaches infinity, or the motion
        // gets there.)
        assert!(
            matches!(err, StepError::NonFinite { .. } | StepError::Singular { .. } | StepError::NotConverged { .. }),
            "{err}"
        );
        assert_eq!(sim.energy(), Some(before));
        assert_eq!(sim.speeds()[0], w);
        assert!(before.residual().abs() < 1e-9 * before.scale(), "{before:?}");
    }

    /// A singular iteration matrix is reported as such, naming the bodies along the coordinate
    /// it does not determine, with the state left at the step start. No checked file produces
    /// one (the plausible ranges keep every matrix entry finite and every inertia at least
    /// `limits::MIN_MASS`), so the spring's stiffness is made infinite behind the checks.
    #[test]
    fn a_singular_iteration_matrix_is_a_typed_error_naming_the_bodies() {
        let text = r#"Scenario(name: "pair", t_end: 1.0, elements: [
                (name: "drive", kind: Torque(tau: Constant(10.0))),
                (name: "a", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),
                (name: "spring", kind: SpringDamper(c: 1e4, d: 1.0)),
                (name: "b", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),
            ], connections: [("drive.flange", "a.flange_a"), ("a.flange_b", "spring.flange_a"),
                ("spring.flange_b", "b.flange_a")])"#;
        let sc = Scenario::parse(text, "pair").expect("parses");
        let mut sim = Simulation::new(sc.build(text, "pair").expect("builds"));
        sim.step(1e-3).expect("a sound step");
        let (t, w) = (sim.time(), sim.speeds().to_vec());
        sim.model.modes = std::sync::Arc::new(crate::solver::library::ModeLibrary::unshared(sim.model.net.clone()));
        for law in sim.model.modes.network_mut().laws.iter_mut() {
            if let Law::SpringDamper { c, .. } = law {
                *c = f64::INFINITY;
            }
        }
        sim.slots.iter_mut().for_each(|s| s.newton_h = f64::NAN);
        sim.epoch += 1;
        let err = sim.step(1e-3).expect_err("the matrix is singular");
        assert!(matches!(err, StepError::Singular { .. }), "{err}");
        // (Either body: the infinite spring couples the two.)
        assert!(err.to_string().contains("in a;") || err.to_string().contains("in b;"), "{err}");
        assert_eq!((sim.time(), sim.speeds()), (t, &w[..]), "the state is the step start's");
    }
}
