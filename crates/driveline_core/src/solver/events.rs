//! Event detection and location: slips crossing zero, locks reaching their limit, forces switching.

use super::*;

/// The fraction of its static limit that every lock must have to spare at a sub-step's end for
/// the break-away screen to skip the stage samples ([`Simulation::breakaway_suspects`]).
pub(super) const STAGE_SAMPLE_MARGIN: f64 = 0.25;

/// The largest `omega h` (rad) of a mode's fastest oscillation at which the break-away screen
/// may skip the stage samples: a twelfth of a period, over which a torque departs from its
/// chord by at most `1 - cos(0.25)`, 3 % of its swing.
pub(super) const MAX_SKIP_OMEGA_H: f64 = 0.5;
impl Simulation {
    /// Event function `g` (event when `g > 0`) of kind `ev` at a sample of the last sub-step:
    /// a stage, the end, or the dense output at time `t` (already placed in `phi_e/w_e`).
    pub(super) fn event_value(&mut self, ev: Ev, at: At, t: f64) -> f64 {
        match ev {
            Ev::Slip(i) => {
                let w = match at {
                    At::Stage(k) => &self.sc.w_st[k],
                    At::End => &self.sc.w1,
                    At::Dense => &self.sc.w_e,
                };
                self.slip_g(i, w)
            }
            Ev::Engage(i) | Ev::Release(i) => {
                let Some(k) = self.model.net.friction[i].law.free_signal() else { return -1.0 };
                let u = match at {
                    At::Stage(j) => self.ws.sig[j][k],
                    At::End => self.ws.sig_end[k],
                    At::Dense => self.model.signals[k].eval(t),
                };
                Self::force_g(ev, u)
            }
            Ev::Group => self.group_violation(at, t),
            Ev::Breakaway(i) => {
                let (lam, sig) = match at {
                    At::Stage(k) => {
                        self.stage_torques();
                        (&self.sc.lam_st[k], &self.ws.sig[k])
                    }
                    At::End => {
                        self.end_torques();
                        (&self.ws.lam_end, &self.ws.sig_end)
                    }
                    At::Dense => {
                        self.fill_signals(2, t, false);
                        self.constraint_torques_at_e(t);
                        (&self.ws.lam, &self.ws.sig[2])
                    }
                };
                let s = &self.slots[self.cur];
                let pos = s.locked.iter().position(|&k| k == i).unwrap_or(0);
                self.model.net.friction[i]
                    .law
                    .hold_excess(self.capacity(i, sig), lam[self.model.net.rows.len() + pos], lam)
                    .0
            }
            Ev::Regime(k) => {
                if at == At::Dense {
                    self.fill_signals(2, t, false);
                }
                let (phi, w) = match at {
                    At::Stage(j) => (&self.sc.phi_st[j], &self.sc.w_st[j]),
                    At::End => (&self.sc.phi1, &self.sc.w1),
                    At::Dense => (&self.sc.phi_e, &self.sc.w_e),
                };
                let sig = match at {
                    At::Stage(j) => &self.ws.sig[j],
                    At::End => &self.ws.sig_end,
                    At::Dense => &self.ws.sig[2],
                };
                let st = self.regimes[k];
                if self.model.net.laws[k].next_regime(st, phi, w, sig) != st.regime { 1.0 } else { -1.0 }
            }
        }
    }

    /// Looks for state events in the last integrated sub-step. Returns the earliest located
    /// `theta` and the friction elements to force into the stuck-candidate set.
    pub(super) fn detect_event(&mut self, h: f64) -> Option<(f64, u64, u64)> {
        let t0 = self.t;
        let mut best: Option<(f64, Ev)> = None;
        let mut forced: u64 = 0;
        // Slips located in this sub-step: a mask, their thetas in `ws.slip_theta`.
        let mut slipped: u64 = 0;
        // Break-aways located in this sub-step (their thetas in `ws.slip_theta` too).
        let mut breaking_at: u64 = 0;
        let nf = self.model.net.friction.len();
        let suspects = self.breakaway_suspects(h);
        // Called for the events whose cheap screen ([`Simulation::may_trigger`]) passed.
        let consider = |this: &mut Self, ev: Ev, best: &mut Option<(f64, Ev)>| -> Option<f64> {
            // Sample at the stages and the end, bracket, locate.
            let mut lo = 0.0;
            for (th, at) in [(C[0], At::Stage(0)), (C[1], At::Stage(1)), (1.0, At::End)] {
                if this.event_value(ev, at, t0 + th * h) > 0.0 {
                    let theta = this.locate(ev, lo, th, h);
                    if best.is_none_or(|b| theta < b.0) {
                        *best = Some((theta, ev));
                    }
                    return Some(theta);
                }
                lo = th;
            }
            None
        };
        // In element order (the first of equal event times wins): the sliding elements, the
        // elements under an unsteady normal force, and the break-away suspects.
        let watch = self.friction.force_watch;
        for i in bits((self.friction.sliding | watch | suspects) & low_bits(nf)) {
            let watched = watch & 1 << i != 0;
            let mode = self.modes[i];
            match mode {
                FrictionMode::Forward | FrictionMode::Backward => {
                    if self.may_trigger(Ev::Slip(i))
                        && let Some(th) = consider(self, Ev::Slip(i), &mut best)
                    {
                        self.sc.slip_theta[i] = th;
                        slipped |= 1 << i;
                    }
                    if watched && self.may_trigger(Ev::Release(i)) {
                        consider(self, Ev::Release(i), &mut best);
                    }
                }
                FrictionMode::Free => {
                    if watched && self.may_trigger(Ev::Engage(i)) {
                        consider(self, Ev::Engage(i), &mut best);
                    }
                }
                FrictionMode::Stuck => {
                    if watched && self.may_trigger(Ev::Release(i)) {
                        consider(self, Ev::Release(i), &mut best);
                    }
                    // Break-away, sampled at both stages and the end so that a torque peak
                    // inside the step is not missed, then located on the dense output.
                    if suspects & !self.friction.trust_locks & (1 << i) != 0
                        && !self.slots[self.cur].redundant
                        && let Some(th) = consider(self, Ev::Breakaway(i), &mut best)
                    {
                        self.sc.slip_theta[i] = th;
                        breaking_at |= 1 << i;
                    }
                }
            }
        }
        if self.slots[self.cur].redundant && suspects != 0 && !self.friction.trust_group {
            consider(self, Ev::Group, &mut best);
        }
        for k in 0..self.model.net.laws.len() {
            if self.model.net.laws[k].has_regimes() {
                consider(self, Ev::Regime(k), &mut best);
            }
        }
        let (theta, ev) = best?;
        let tol = (self.params.event_time_tolerance / h).max(1e-12) * 4.0;
        // The elements of `mask` whose located theta is that of the event, to tolerance.
        let at_theta = |mask: u64| {
            let mut out = 0;
            for i in bits(mask) {
                if self.sc.slip_theta[i] <= theta + tol {
                    out |= 1 << i;
                }
            }
            out
        };
        forced |= at_theta(slipped);
        // Every break-away located at the same instant goes together (two symmetric wheels
        // breaking loose at once): resolving one at a time would find the other's event at
        // the very start of the next sub-step, and the first one stuck again.
        let breaking = if let Ev::Breakaway(_) = ev { at_theta(breaking_at) } else { 0 };
        Some((theta.clamp(0.0, 1.0), forced, breaking))
    }

    /// The stuck elements whose break-away test may fire in the last sub-step, as a mask: the
    /// others need no event search. One pass over the locked rows at the samples
    /// [`Simulation::event_value`] takes (both stages and the end; only the end when a
    /// non-redundant mode holds every lock with [`STAGE_SAMPLE_MARGIN`] of its limit to spare
    /// there, no signal may turn inside the sub-step and the mode's fastest oscillation turns
    /// at most [`MAX_SKIP_OMEGA_H`] in it, which spares the stage constraint torques on most
    /// steps of a vehicle). A non-redundant mode marks
    /// each element whose break-away function is positive at a sample; a redundant one marks
    /// every element when the minimum-norm split is not strictly inside every limit at every
    /// sample (the first certificate of [`Simulation::group_violation`]; a LossyGear always
    /// takes the group test).
    pub(super) fn breakaway_suspects(&mut self, h: f64) -> u64 {
        if self.slots[self.cur].locked.is_empty() {
            return 0;
        }
        let redundant = self.slots[self.cur].redundant;
        self.end_torques();
        let np = self.model.net.rows.len();
        let s = &self.slots[self.cur];
        let resolved = s.omega2 * h * h <= MAX_SKIP_OMEGA_H * MAX_SKIP_OMEGA_H;
        if !redundant && !self.signals.may_turn && resolved {
            // Every lock held with a quarter of its limit to spare at the end needs no stage
            // samples: between the step start, where it was held, and the end its torque
            // follows the smooth stage polynomial, which does not climb a quarter of the limit
            // and fall back within one step (what steps at the start, a throttle cut or a
            // pressure, is seen at the end already). Not while a signal may itself rise and
            // fall back inside the sub-step: a 60 Hz sine torque at 60 Hz steps is the same at
            // every step end, and breaks a lock away at the stages
            // (`tests/elements.rs`, `a_pulsating_torque_breaks_away_between_step_ends`). Nor
            // while the mode's fastest oscillation turns more than `MAX_SKIP_OMEGA_H` rad in
            // the sub-step: a shaft ringing at 20 Hz at 60 Hz steps can carry a lock's torque
            // past its limit between two step ends well inside it
            // (`a_ringing_shaft_breaks_away_between_step_ends`).
            let Work { lam_end, sig_end, .. } = &self.ws;
            let deep = self.slots[self.cur].locked.iter().enumerate().all(|(pos, &i)| {
                let (g, limit) =
                    self.model.net.friction[i].law.hold_excess(self.capacity(i, sig_end), lam_end[np + pos], lam_end);
                g < -STAGE_SAMPLE_MARGIN * limit
            });
            if deep {
                return 0;
            }
        }
        self.stage_torques();
        let Work { lam_end, sig, sig_end, .. } = &self.ws;
        let Scratch { lam_st, .. } = &*self.sc;
        let samples = [(&lam_st[0], &sig[0]), (&lam_st[1], &sig[1]), (lam_end, sig_end)];
        if redundant {
            let all_inside = samples.iter().all(|&(lam, sig)| self.min_norm_inside(lam, |i| self.capacity(i, sig)));
            return if all_inside { 0 } else { u64::MAX };
        }
        let mut mask = 0;
        for (pos, &i) in self.slots[self.cur].locked.iter().enumerate() {
            let law = &self.model.net.friction[i].law;
            for &(lam, sig) in &samples {
                if law.hold_excess(self.capacity(i, sig), lam[np + pos], lam).0 > 0.0 {
                    mask |= 1 << i;
                    break;
                }
            }
        }
        mask
    }

    /// A cheap screen before the sampling of [`Simulation::detect_event`]: false when the event
    /// function of a slip, engage or release event (the same `slip_g` / `force_g` that
    /// [`Simulation::event_value`] uses, without its dispatch) is positive at none of the three
    /// samples; true for the kinds that need constraint torques or regimes.
    #[inline]
    pub(super) fn may_trigger(&self, ev: Ev) -> bool {
        match ev {
            Ev::Slip(i) => {
                // `slip_g` at the three samples, in one pass over the row.
                let d = -self.modes[i].dir();
                let g = self.model.net.friction[i].row.dot3([&self.sc.w_st[0], &self.sc.w_st[1], &self.sc.w1]);
                g.iter().any(|&g| d * g > 0.0)
            }
            Ev::Engage(i) | Ev::Release(i) => {
                let Some(k) = self.model.net.friction[i].law.free_signal() else { return false };
                [self.ws.sig[0][k], self.ws.sig[1][k], self.ws.sig_end[k]].iter().any(|&u| Self::force_g(ev, u) > 0.0)
            }
            Ev::Group | Ev::Breakaway(_) | Ev::Regime(_) => true,
        }
    }

    /// Slip event function of sliding element `i` at speeds `w`: positive once the slip has
    /// reversed against the sliding direction.
    pub(super) fn slip_g(&self, i: usize, w: &[f64]) -> f64 {
        -self.modes[i].dir() * self.model.net.friction[i].row.dot(w)
    }

    /// Engage (release) event function from the normal-force signal `u`: positive once the
    /// force is on (off).
    pub(super) fn force_g(ev: Ev, u: f64) -> f64 {
        if matches!(ev, Ev::Engage(_)) { u } else { -u }
    }

    /// Locates the first `theta` in `(lo, hi]` where the event function becomes positive,
    /// returning a point where it is positive (the right end of the final bracket), or 0 for a
    /// lock over its limit at the sub-step start.
    pub(super) fn locate(&mut self, ev: Ev, mut lo: f64, mut hi: f64, h: f64) -> f64 {
        let t0 = self.t;
        let mut g_lo = if lo == 0.0 {
            self.dense(0.0);
            let g0 = self.event_value(ev, At::Dense, t0);
            // A lock already over its limit at the sub-step start (an input stepped): the
            // modes are selected there, before any motion. The selection releases something:
            // a located break-away is forced to go, and a group's function is positive only
            // beyond the classification tolerance. Slip events keep the bracket: a slip of
            // rounding size at the start is not a reversal.
            if g0 > 0.0 && matches!(ev, Ev::Breakaway(_) | Ev::Group) {
                return 0.0;
            }
            g0.min(0.0)
        } else {
            self.dense(lo);
            self.event_value(ev, At::Dense, t0 + lo * h)
        };
        let mut g_hi = if hi == 1.0 {
            self.event_value(ev, At::End, t0 + h)
        } else {
            self.dense(hi);
            self.event_value(ev, At::Dense, t0 + hi * h)
        };
        let tol = self.params.event_time_tolerance / h;
        let mut k = 0;
        while (hi - lo) > tol && k < 200 {
            k += 1;
            // Alternate secant and bisection: superlinear on smooth functions, and never
            // slower than bisection.
            let mid = if k % 2 == 1 && g_hi > g_lo && g_lo <= 0.0 {
                let s = lo + (hi - lo) * (-g_lo) / (g_hi - g_lo);
                s.clamp(lo + 0.01 * (hi - lo), hi - 0.01 * (hi - lo))
            } else {
                0.5 * (lo + hi)
            };
            self.dense(mid);
            let g = self.event_value(ev, At::Dense, t0 + mid * h);
            if g > 0.0 {
                hi = mid;
                g_hi = g;
            } else {
                lo = mid;
                g_lo = g;
            }
        }
        hi
    }
}

/// Where an event function is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum At {
    Stage(usize),
    End,
    Dense,
}

/// Event function kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ev {
    Slip(usize),
    Engage(usize),
    Release(usize),
    Breakaway(usize),
    /// Break-away of a redundant lock set, as a whole.
    Group,
    Regime(usize),
}

#[cfg(test)]
mod tests {
    use crate::{FrictionMode, Scenario, Simulation};

    /// A shaft of `J = 2 kg m^2` spinning at `w0` rad/s, braked by a constant kinetic torque
    /// `mu cgeo fn = 0.5 * 1 * 8 = 4 N m`.
    fn braked_shaft(w0: f64) -> Simulation {
        let text = format!(
            r#"Scenario(name: "braked", t_end: 8.0, elements: [
                (name: "fixed", kind: Fixed()),
                (name: "shaft", kind: Inertia(J: 2.0, phi_start: 0.0, w_start: {w0})),
                (name: "brake", kind: Brake(fn_max: 8.0, f_normalized: Constant(1.0), use_support: true)),
            ], connections: [("shaft.flange_b", "brake.flange_a"), ("brake.support", "fixed.flange")])"#
        );
        let sc = Scenario::parse(&text, "braked").expect("parses");
        Simulation::new(sc.build(&text, "braked").expect("builds"))
    }

    /// The slip reaches zero at `t* = J w0 / tau` (the speed falls linearly): the located
    /// event lands there at every step size, and the shaft is held from then on.
    #[test]
    fn a_braked_shaft_locks_at_the_analytic_time() {
        let w0 = 10.3;
        let t_lock = 2.0 * w0 / 4.0;
        for dt in [1e-4, 1e-3, 1.0 / 60.0, 1.0 / 30.0f64] {
            let mut sim = braked_shaft(w0);
            let steps = (7.0 / dt).round() as usize;
            let mut events = Vec::new();
            for k in 1..=steps {
                sim.step(k as f64 * dt - sim.time()).expect("step");
                events.extend_from_slice(sim.events());
            }
            let locks: Vec<_> = events.iter().filter(|e| e.to == FrictionMode::Stuck).collect();
            assert_eq!(locks.len(), 1, "dt {dt}: {events:?}");
            // The localisation tolerance is about 1e-12 s; the speed is linear in time, so the
            // located zero is the analytic one to rounding.
            assert!((locks[0].time - t_lock).abs() < 1e-9, "dt {dt}: locked at {} s, not {t_lock} s", locks[0].time);
            assert_eq!(sim.speeds().iter().fold(0.0f64, |m, w| m.max(w.abs())), 0.0, "dt {dt}: held");
        }
    }
}
