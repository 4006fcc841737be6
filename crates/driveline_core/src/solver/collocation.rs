//! The 2-stage Gauss-Legendre collocation step: Newton on the stage equations, commit, dense output.

use super::*;

/// Gauss-Legendre 2-stage coefficients.
pub(super) const S3: f64 = 0.288_675_134_594_812_9; // sqrt(3)/6

pub(super) const C: [f64; 2] = [0.5 - S3, 0.5 + S3];

pub(super) const A: [[f64; 2]; 2] = [[0.25, 0.25 - S3], [0.25 + S3, 0.25]];

pub(super) const B: [f64; 2] = [0.5, 0.5];

/// `b^T A^{-1}`: the end value from converged stages without another force evaluation.
pub(super) const D: [f64; 2] = [-1.732_050_807_568_877_2, 1.732_050_807_568_877_2];

/// `A^2`.
pub(super) const A2: [[f64; 2]; 2] = [
    [A[0][0] * A[0][0] + A[0][1] * A[1][0], A[0][0] * A[0][1] + A[0][1] * A[1][1]],
    [A[1][0] * A[0][0] + A[1][1] * A[1][0], A[1][0] * A[0][1] + A[1][1] * A[1][1]],
];

/// Sub-steps a reused Jacobian must have served before three Newton iterations on it call for
/// a fresh one (four always do).
pub(super) const JAC_PAYBACK: u32 = 8;

/// Growth per sub-step of Newton's contraction estimate while no second iteration measures it
/// anew (the Jacobian it was measured on ages): doubles in about fourteen sub-steps. Through
/// the 8HP sedan's shifts the measured contraction stays within a factor of ten over a
/// Jacobian's life of forty steps, where it jumps when a clutch's pressure does.
pub(super) const ETA_AGEING: f64 = 1.05;

/// The fraction of the Newton tolerance that the estimated error of an iterate must be below
/// to end the iteration on the estimate: the estimate comes from an earlier iteration, and an
/// error left at the whole tolerance on every step flips more of the marginal decisions (a
/// stick-or-slide tie) than the confirmed iterates do.
pub(super) const ETA_SAFETY: f64 = 0.1;

/// The largest correction, in Newton tolerances, that the contraction estimate may end an
/// iteration on: within it Newton is in its linear range (the quadratic remainder of a
/// correction of 1e-7 relative is far below the tolerance); beyond it (an input that stepped
/// hard, a lock's impact) the iterate is confirmed by another iteration.
pub(super) const ETA_RANGE: f64 = 1e3;

/// Corrections a damped Newton iteration ([`Simulation::damped_newton`]) may take. Far from
/// the motion, Newton on a quadratic law halves the distance to its root per correction, and
/// each is confirmed by another: 256 corrections come back from a first one 1e30 times too
/// far (a load of 1e-12 kg m^2 thrown by 1,000 N m for a 1 s step is 1e15 times).
pub(super) const DAMPED_NEWTON_ITERATIONS: usize = 256;

/// The smallest damping of a damped Newton correction before the iteration fails (and the
/// sub-step is cut).
pub(super) const MIN_DAMPING: f64 = 1.0 / 1024.0;
impl Simulation {
    /// Evaluates the Jacobian of a nonlinear mode now and factors its Newton matrix for `h`
    /// into the slot.
    pub(super) fn fresh_jacobian(&mut self, slot: usize, h: f64) {
        self.jacobians(slot, 0);
        let s = &mut self.slots[slot];
        s.jac_epoch = self.epoch;
        s.jac_stale = false;
        self.factor_newton(slot, h, false);
    }

    /// Factors the Newton matrix `I (x) Mr - h A (x) Dr - h^2 A^2 (x) Kr` for step `h`, into the
    /// slot (kept for the next steps of that size) or into the scratch buffer (partial steps).
    pub(super) fn factor_newton(&mut self, slot: usize, h: f64, scratch: bool) {
        let set = self.newton_of(slot);
        let m = self.slots[slot].m;
        if self.sc.newton_inv.len() < 4 * m * m {
            // (A mode with more free coordinates than the base mode: a rank decision at
            // rounding level. Once.)
            self.sc.size_newton(m);
        }
        let s = &mut self.slots[slot];
        let c = &*s.mode;
        let m = c.m;
        let mm = 2 * m;
        let Scratch { newton_inv, newton_piv, newton_tmp, singular, .. } = &mut *self.sc;
        let NewtonFactors { dr, kr, newton_inv: own_inv, newton_piv: own_piv, .. } = &mut self.newton.sets[set];
        let (lu, piv) = if scratch {
            (newton_inv, newton_piv)
        } else {
            s.newton_h = h;
            (own_inv, own_piv)
        };
        for bi in 0..2 {
            for bk in 0..2 {
                for a in 0..m {
                    for b in 0..m {
                        let mr = if bi == bk { c.mr[a * m + b] } else { 0.0 };
                        lu[(bi * m + a) * mm + bk * m + b] =
                            mr - h * A[bi][bk] * dr[a * m + b] - h * h * A2[bi][bk] * kr[a * m + b];
                    }
                }
            }
        }
        // A singular matrix leaves non-finite factors: the Newton iteration then diverges, its
        // sub-step is cut, and a step that still ends non-finite names the coordinate.
        if let Err(e) = linalg::lu_factor(lu, mm, piv) {
            *singular = Some((slot, e.column % m.max(1)));
        }
        // The explicit inverse: every Newton correction of the factors' lifetime (many steps in
        // a linear mode or on a kept Jacobian) is then one matrix-vector product. Stored by
        // columns, which the product runs over ([`Correction`]).
        // All unit columns at once (each as `lu_solve` would give it), into rows of `x`.
        let x = &mut newton_tmp[..mm * mm];
        x.fill(0.0);
        for c in 0..mm {
            x[c * mm + c] = 1.0;
        }
        linalg::lu_solve_many(lu, mm, piv, x, mm);
        linalg::transpose(x, mm, mm, lu, mm);
    }

    /// One Gauss step of size `h` from the current state in the current mode, into
    /// `ws.phi1/w1` (end) and `ws.phi_st/w_st` (stages). Does not change the state.
    pub(super) fn integrate(&mut self, h: f64, full_step: bool) {
        self.sc.newton_failed = false;
        let slot = self.cur;
        let t0 = self.t;
        let jump = std::mem::take(&mut self.inputs.jump);
        if !std::mem::take(&mut self.signals.stages_ready) {
            self.fill_stage_signals(t0, h);
        }
        // The end forces of the last sub-step, if its end was evaluated: the state now.
        let end_forces = self.ws.cached.has(Cached::END);
        self.ws.cached = Cached::NONE;
        self.pred.stage_g_ok = false;
        self.pred.started_from_forces = false;
        let prescribed = !self.slots[slot].rhs.is_empty();
        // A mode whose forces depend on time alone: the quadrature of the time-only kernel is
        // the one linear solve, without the factors a new sub-step length would need.
        if !prescribed && self.time_only_network() && self.time_only_integrate(h) {
            return;
        }
        if prescribed {
            self.prescribed(t0 + C[0] * h, 0);
            self.prescribed(t0 + C[1] * h, 1);
            self.prescribed(t0 + h, 2);
        }
        let (scratch, reused) = self.newton_factors(slot, h, full_step);
        let predicted = self.stage_guess(slot, h, scratch, jump, end_forces, prescribed);
        self.newton_solve(slot, h, scratch, reused, predicted, prescribed);
        // `ws.stage_g` holds the reduced forces of the last iterate: the next sub-step extrapolates them.
        self.pred.stage_g_ok = true;
        self.stage_states(h);
        self.end_values(slot, h, prescribed);
    }

    /// Makes the Newton factors of the current mode ready for a sub-step of `h`: kept,
    /// refactored for another step length, or a fresh Jacobian. Returns `(scratch, reused)`:
    /// the factors are the sub-step's own (`ws.newton_inv`, an event-cut length) rather than
    /// the slot's, and the Jacobian is a kept one.
    fn newton_factors(&mut self, slot: usize, h: f64, full_step: bool) -> (bool, bool) {
        let linear = self.slots[slot].linear;
        let cached_h = self.slots[slot].newton_h;
        // Rounding-level differences in h (k dt - t) reuse the factors: the one Newton solve of
        // a linear mode is then off by ~1e-12 of its update, far below the truncation error.
        // Nonlinear modes: the Jacobian (at a step start, signals at the first stage) is kept
        // over the steps of one epoch while Newton contracts fast on it (simplified Newton);
        // a slow iteration marks it stale and the next sub-step evaluates it afresh.
        let reusable =
            !linear && !cached_h.is_nan() && self.slots[slot].jac_epoch == self.epoch && !self.slots[slot].jac_stale;
        let mut reused = reusable;
        let scratch = if !linear {
            if reusable && (h - cached_h).abs() <= 1e-12 * h {
                false
            } else if reusable && !full_step {
                self.factor_newton(slot, h, true);
                true
            } else {
                reused = false;
                self.fresh_jacobian(slot, h);
                false
            }
        } else if cached_h.is_nan() {
            self.jacobians(slot, 0);
            self.factor_newton(slot, h, false);
            false
        } else if (h - cached_h).abs() <= 1e-12 * h {
            false
        } else if full_step {
            self.factor_newton(slot, h, false);
            false
        } else {
            self.factor_newton(slot, h, true);
            true
        };
        (scratch, reused)
    }

    /// The stage guesses `Q1 Q2` Newton starts from, into `ws.q` (and `q0 = w` on the free
    /// columns). Returns whether they were predicted from the last sub-step.
    fn stage_guess(
        &mut self,
        slot: usize,
        h: f64,
        scratch: bool,
        jump: bool,
        end_forces: bool,
        prescribed: bool,
    ) -> bool {
        let linear = self.slots[slot].linear;
        let m = self.slots[slot].m;
        // Nonlinear modes continuing the last sub-step in the same mode and epoch: the stage
        // guesses come from its collocation polynomial, extrapolated (error O(h^3) instead of
        // the O(h) of a constant guess), so that Newton converges in one correction. Other
        // sub-steps start from the stage guesses Q_i = q0.
        let predicted = !linear && self.pred.slot == slot && self.pred.epoch == self.epoch;
        {
            // q0 = w on the free columns.
            let Work { q0, q, .. } = &mut self.ws;
            let (q0, q) = (&mut q0[..m], &mut q[..2 * m]);
            for (q0, &c) in q0.iter_mut().zip(&self.slots[slot].basis.free_cols[..m]) {
                *q0 = self.w[c];
            }
            if !predicted {
                q[..m].copy_from_slice(q0);
                q[m..].copy_from_slice(q0);
            }
        }
        if predicted {
            let r = h / self.pred.h;
            let (q, Predictor { q0: pred_q0, q: pred_q, .. }) = (&mut self.ws.q, &self.pred);
            let (p0, p1, p2) = (&pred_q0[..m], &pred_q[..m], &pred_q[m..2 * m]);
            for (i, qi) in q[..2 * m].chunks_exact_mut(m.max(1)).enumerate() {
                let [l0, l1, l2] = lagrange(1.0 + C[i] * r);
                for (((q, a), b), c) in qi.iter_mut().zip(p0).zip(p1).zip(p2) {
                    *q = l0 * a + l1 * b + l2 * c;
                }
            }
            // Inputs that stepped at the step start change the accelerations from there on,
            // which no extrapolation of the last sub-step sees: the guess follows them, on its
            // own or with the extrapolated forces (see `NewtonStart`).
            // (A sliding lossy gear or limited-slip pack switches its law with the sign of a
            // constraint torque: its force is no smooth function of time to extrapolate. Nor
            // are forces extrapolated over more than four times the last sub-step's length: the
            // step after an event continues from a short rest of a step, a frame-time hitch
            // from short steps, and the quadratic would amplify the forces' errors by up to
            // the square of the ratio; a 50 ms hitch after 1 ms steps diverged.)
            let smooth = !prescribed && self.model.torque_dependent & self.friction.sliding == 0 && r <= 4.0;
            if self.params.newton_start == NewtonStart::Forces
                && smooth
                && end_forces
                && self.pred.g_ok
                && self.pred.force_start
            {
                self.predict_from_forces(slot, h, r, scratch, jump);
                self.pred.started_from_forces = true;
            } else if jump {
                self.follow_input_steps(slot, h, scratch);
            }
        }
        predicted
    }

    /// Simplified Newton on the stage equations from the guesses in `ws.q`, on the factors
    /// [`Simulation::newton_factors`] made ready: until a correction is within the tolerance
    /// (or, without the energy ledger, the contraction estimate says the iterate is), with a
    /// fresh Jacobian when a kept one converges slowly.
    fn newton_solve(
        &mut self,
        slot: usize,
        h: f64,
        scratch: bool,
        mut reused: bool,
        predicted: bool,
        prescribed: bool,
    ) {
        let linear = self.slots[slot].linear;
        let m = self.slots[slot].m;
        // A fresh Jacobian costs about two and a half Newton iterations (its evaluation and the
        // factors): worth it when the old one has served a while and now needs a third
        // iteration. One aged within a few sub-steps (clutch pressures ramping through a
        // shift) would age as fast again: it is kept until a fourth iteration is needed.
        if reused {
            self.slots[slot].jac_uses += 1;
        }
        let slow = if self.slots[slot].jac_uses > JAC_PAYBACK { 3 } else { 4 };
        // Without the energy ledger an iteration may end on its contraction estimate (see
        // `IntegrationParameters::track_energy`); not where a law switches with a constraint
        // torque's sign (sliding lossy gears, limited-slip packs), nor from an estimate made
        // in another mode or epoch.
        let by_estimate =
            !linear && !self.params.track_energy && self.model.torque_dependent & self.friction.sliding == 0;
        self.pred.newton_eta = if by_estimate && predicted { self.pred.newton_eta * ETA_AGEING } else { f64::INFINITY };
        let mut last_dq = f64::INFINITY;
        let mut iter = 0;
        loop {
            iter += 1;
            // A correction after the first is watched for divergence.
            let watched = !linear && iter > 1;
            if watched {
                let m2 = 2 * m;
                self.sc.q_last[..m2].copy_from_slice(&self.ws.q[..m2]);
            }
            // From the guess Q_i = q0, Mr (Q_i - q0) is +0.0 (a row's diagonal term is +0.0,
            // so the sum is too) and subtracting it changes nothing: skipped.
            let residual = if iter == 1 && !predicted { Residual::Forces } else { Residual::Full };
            let at_start = iter == 1 && !prescribed && !predicted;
            let (norm_dq, norm_q) = self.newton_correction(slot, h, scratch, prescribed, residual, at_start);
            if iter == 1 {
                // The force start costs a matrix-vector product: worth it while the simpler
                // start would miss (a shift's transients), not in a steady cruise.
                let keep = if self.pred.started_from_forces { 0.01 } else { 1.0 };
                self.pred.force_start = norm_dq > keep * self.params.newton_tolerance * (1.0 + norm_q);
            }
            // (A NaN correction counts as grown.)
            let shrank = norm_dq < last_dq;
            if watched && !shrank {
                // The correction grew: the Jacobian is too far from the iterate's. Back to the
                // iterate before it, to go on from there on a fresh Jacobian (a kept one), or
                // by a damped Newton iteration (a fresh one). (Cutting the sub-step does not
                // help such a law: a quadratic drag's slope is zero at rest, and the first
                // correction throws a light load as far past its terminal speed at any sub-step
                // length.)
                let m2 = 2 * m;
                self.ws.q[..m2].copy_from_slice(&self.sc.q_last[..m2]);
                if reused {
                    reused = false;
                    last_dq = f64::INFINITY;
                    self.refresh_jacobian(slot, h, scratch, false);
                    continue;
                }
                self.damped_newton(slot, h, scratch, prescribed);
                break;
            }
            // (A diverged iteration, a correction or an iterate grown past any number, stops at
            // once: its relative tolerance may be infinite too.)
            if norm_dq == f64::INFINITY {
                self.stats.newton_failures += 1;
                self.sc.newton_failed = true;
                break;
            }
            let tol = self.params.newton_tolerance * (1.0 + norm_q);
            if by_estimate && iter > 1 {
                let theta = norm_dq / last_dq;
                self.pred.newton_eta = if theta < 1.0 { theta / (1.0 - theta) } else { f64::INFINITY };
            }
            last_dq = norm_dq;
            if by_estimate
                && norm_dq > tol
                && norm_dq <= ETA_RANGE * tol
                && self.pred.newton_eta * norm_dq <= ETA_SAFETY * tol
            {
                // The corrected iterate is within the tolerance by the estimate (RADAU5's
                // criterion); the forces just evaluated, at the iterate before it, stand in for
                // the stage forces (the stage torques' inputs, within the correction's effect).
                self.ws.cached.insert(Cached::STAGE_FORCES);
                break;
            }
            if linear || norm_dq <= tol {
                // A converged correction is within the tolerance: the forces just evaluated are
                // the stage forces (also when the first correction of a predicted guess is).
                // One linear solve from the guess is exact but its forces are those of the guess.
                if !linear && (iter > 1 || predicted) {
                    self.ws.cached.insert(Cached::STAGE_FORCES);
                }
                // Forces that depend on time alone are the same at the guess and at the stages
                // (their powers are not: the energy ledger re-evaluates them).
                if linear && self.forces_time_only() && !self.params.track_energy {
                    self.ws.cached.insert(Cached::STAGE_FORCES);
                }
                break;
            }
            if iter >= self.params.max_newton_iterations {
                self.stats.newton_failures += 1;
                self.sc.newton_failed = true;
                break;
            }
            if reused && iter >= slow {
                // Slow on the old Jacobian: continue from this iterate on a fresh one.
                reused = false;
                last_dq = f64::INFINITY;
                self.refresh_jacobian(slot, h, scratch, false);
            }
        }
        if reused && iter >= slow {
            self.slots[slot].jac_stale = true;
        }
    }

    /// A fresh Jacobian in place of the one in use: at the sub-step start, or at the Newton
    /// iterate in `ws.q` (`at_iterate`); factored for `h` into the sub-step's own factors
    /// (`scratch`) or the slot's.
    fn refresh_jacobian(&mut self, slot: usize, h: f64, scratch: bool, at_iterate: bool) {
        if at_iterate {
            self.jacobians_at_iterate(slot, h);
        } else {
            self.jacobians(slot, 0);
        }
        let s = &mut self.slots[slot];
        s.jac_epoch = self.epoch;
        s.jac_stale = false;
        if scratch {
            s.newton_h = f64::NAN;
        }
        self.factor_newton(slot, h, scratch);
    }

    /// One Newton correction of the stages in `ws.q`: the stage forces at the iterate (at the
    /// current motion when `at_start`), the residual, `Q += J^-1 R` on the factors in use.
    /// Returns the largest correction and the largest updated stage value.
    #[inline]
    fn newton_correction(
        &mut self,
        slot: usize,
        h: f64,
        scratch: bool,
        prescribed: bool,
        residual: Residual,
        at_start: bool,
    ) -> (f64, f64) {
        self.stats.newton_iterations += 1;
        self.iterate_stage_states(h, at_start);
        self.reduced_stage_forces(slot, prescribed);
        let s = &self.slots[slot];
        let c = &*s.mode;
        let Work { q, q0, stage_g: gq, .. } = &mut self.ws;
        let Scratch { newton_inv, res, .. } = &mut *self.sc;
        let inv = if scratch { &newton_inv[..] } else { &self.newton.sets[s.newton].newton_inv[..] };
        Correction { residual, h, mr: &c.mr, gq, q0, inv }.apply(c.m, q, res)
    }

    /// Newton with a Jacobian at every iterate and damped corrections, from the stages in
    /// `ws.q`: where the simplified iteration on a fresh Jacobian diverged. Each correction
    /// `dq` at `x` is tried as `x + lambda dq` and kept when the simplified correction there
    /// shrinks, `|dq'| <= (1 - lambda / 4) |dq|` (Deuflhard's natural monotonicity test),
    /// which then doubles `lambda` (to at most 1); else `lambda` halves. Far from the motion,
    /// Newton on a quadratic law halves the distance to its root per correction. Converged
    /// when a correction is within the Newton tolerance; failed past
    /// [`DAMPED_NEWTON_ITERATIONS`] corrections or a `lambda` under [`MIN_DAMPING`].
    fn damped_newton(&mut self, slot: usize, h: f64, scratch: bool, prescribed: bool) {
        let m2 = 2 * self.slots[slot].m;
        let mut lambda = 1.0f64;
        let mut iters = 0;
        let outcome = 'newton: loop {
            // The Jacobian at x, the full correction dq (x in `q_last`, dq in `q_dir`).
            self.refresh_jacobian(slot, h, scratch, true);
            self.sc.q_last[..m2].copy_from_slice(&self.ws.q[..m2]);
            let (norm_dq, norm_q) = self.newton_correction(slot, h, scratch, prescribed, Residual::Full, false);
            iters += 1;
            if norm_dq == f64::INFINITY {
                break false;
            }
            if norm_dq <= self.params.newton_tolerance * (1.0 + norm_q) {
                break true;
            }
            {
                let Work { q, .. } = &mut self.ws;
                let Scratch { q_last, q_dir, .. } = &mut *self.sc;
                for ((d, q), x) in q_dir[..m2].iter_mut().zip(&q[..m2]).zip(&q_last[..m2]) {
                    *d = q - x;
                }
            }
            loop {
                if iters >= DAMPED_NEWTON_ITERATIONS || lambda < MIN_DAMPING {
                    break 'newton false;
                }
                {
                    let Work { q, .. } = &mut self.ws;
                    let Scratch { q_last, q_dir, .. } = &mut *self.sc;
                    for ((q, x), d) in q[..m2].iter_mut().zip(&q_last[..m2]).zip(&q_dir[..m2]) {
                        *q = x + lambda * d;
                    }
                }
                let (norm_bar, norm_q) = self.newton_correction(slot, h, scratch, prescribed, Residual::Full, false);
                iters += 1;
                if norm_bar <= self.params.newton_tolerance * (1.0 + norm_q) {
                    break 'newton true;
                }
                if norm_bar <= (1.0 - 0.25 * lambda) * norm_dq {
                    lambda = (2.0 * lambda).min(1.0);
                    continue 'newton;
                }
                lambda *= 0.5;
            }
        };
        if outcome {
            // The forces just evaluated are the stage forces (within the tolerance).
            self.ws.cached.insert(Cached::STAGE_FORCES);
        } else {
            self.stats.newton_failures += 1;
            self.sc.newton_failed = true;
            // The last Jacobian was taken wherever the iteration ended, perhaps far past any
            // motion: a simplified iteration on it would take its huge matrix's tiny
            // corrections for convergence. The next sub-step takes its own.
            self.slots[slot].jac_stale = true;
            self.slots[slot].newton_h = f64::NAN;
        }
    }

    /// The stage states a Newton iteration evaluates its forces at: from the starting guess
    /// `Q_i = q0` (`at_start`) the current motion, else from the iterate in `ws.q`.
    #[inline]
    fn iterate_stage_states(&mut self, h: f64, at_start: bool) {
        let n = self.model.n_dof;
        if at_start {
            // The starting guess Q_i = q0 is the current motion: W_i = w, Phi_i = phi + h c_i w.
            for i in 0..2 {
                let Scratch { w_st, phi_st, .. } = &mut *self.sc;
                w_st[i][..n].copy_from_slice(&self.w[..n]);
                for k in 0..n {
                    phi_st[i][k] = self.phi[k] + h * C[i] * self.w[k];
                }
            }
        } else if self.model.laws_read_angles {
            self.stage_states(h);
        } else {
            // (No force reads the stage angles: they are formed once, after the iteration.)
            self.stage_speeds();
        }
    }

    /// The stage forces at the iterate's stage states, and their reduced forces `g_j = N^T
    /// f_j` into `ws.stage_g`. The forces go straight into the stage-force cache with their powers:
    /// after the last iteration they are the stage forces (at stages within the Newton
    /// tolerance of the converged ones).
    #[inline]
    fn reduced_stage_forces(&mut self, slot: usize, prescribed: bool) {
        let n = self.model.n_dof;
        let m = self.slots[slot].m;
        for j in 0..2 {
            self.stage_force(j);
            // g_j = N^T f_j (prescribed rows: the reduced force loses N^T M P rho').
            let s = &self.slots[slot];
            let Work { presc_acc: ud, stage_g: gq, .. } = &mut self.ws;
            let Scratch { f_st, acc, .. } = &mut *self.sc;
            let gq = &mut gq[j * m..(j + 1) * m];
            let x = if prescribed {
                for k in 0..n {
                    acc[k] = f_st[j][k] - self.model.net.mass[k] * ud[j][k];
                }
                &acc[..n]
            } else {
                &f_st[j][..n]
            };
            s.nt_times(x, gq);
        }
    }

    /// The sub-step's end values from its converged stages: `q1 = q0 + sum_j D_j (Q_j - q0)`,
    /// `w1 = N q1` (plus the prescribed part), `phi1 = phi0 + h sum_i b_i W_i`.
    fn end_values(&mut self, slot: usize, h: f64, prescribed: bool) {
        let n = self.model.n_dof;
        let s = &self.slots[slot];
        let m = s.m;
        // q1 = q0 + sum_j D_j (Q_j - q0), kept in res (free now).
        {
            let Work { q0, q, .. } = &mut self.ws;
            let Scratch { res, .. } = &mut *self.sc;
            let (q1, q2) = q[..2 * m].split_at(m);
            for (((r, &q0), q1), q2) in res[..m].iter_mut().zip(&q0[..m]).zip(q1).zip(q2) {
                *r = q0 + D[0] * (q1 - q0) + D[1] * (q2 - q0);
            }
        }
        let Work { presc_speed: wp, .. } = &mut self.ws;
        let Scratch { res, w1, phi1, w_st, .. } = &mut *self.sc;
        s.n_times(&res[..m], &mut w1[..n]);
        if prescribed {
            for (w, p) in w1[..n].iter_mut().zip(&wp[2][..n]) {
                *w += p;
            }
        }
        for (((p1, p), w0), w1) in phi1[..n].iter_mut().zip(&self.phi[..n]).zip(&w_st[0][..n]).zip(&w_st[1][..n]) {
            *p1 = p + h * (B[0] * w0 + B[1] * w1);
        }
    }

    /// Stage velocities `W_i = N Q_i` and angles `Phi_i = phi0 + h sum_j a_ij W_j`.
    pub(super) fn stage_states(&mut self, h: f64) {
        self.stage_speeds();
        self.stage_angles(h);
    }

    /// Stage velocities `W_i = N Q_i` (plus the prescribed parts) from `ws.q`.
    pub(super) fn stage_speeds(&mut self) {
        let n = self.model.n_dof;
        let s = &self.slots[self.cur];
        let m = s.m;
        let Work { presc_speed: wp, q, .. } = &mut self.ws;
        let Scratch { w_st, .. } = &mut *self.sc;
        let [w0, w1] = w_st;
        s.n_times_each([&q[..m], &q[m..2 * m]], [&mut w0[..n], &mut w1[..n]]);
        if !s.rhs.is_empty() {
            for (wi, wp) in w_st.iter_mut().zip(wp.iter()) {
                for (x, p) in wi[..n].iter_mut().zip(&wp[..n]) {
                    *x += p;
                }
            }
        }
    }

    /// Stage angles `Phi_i = phi0 + h sum_j a_ij W_j` from the stage speeds in `ws.w_st`.
    pub(super) fn stage_angles(&mut self, h: f64) {
        let n = self.model.n_dof;
        let Scratch { w_st, phi_st, .. } = &mut *self.sc;
        let (w0, w1) = (&w_st[0][..n], &w_st[1][..n]);
        for (i, pi) in phi_st.iter_mut().enumerate() {
            let (a0, a1) = (h * A[i][0], h * A[i][1]);
            for (((p, phi), w0), w1) in pi[..n].iter_mut().zip(&self.phi[..n]).zip(w0).zip(w1) {
                *p = phi + a0 * w0 + a1 * w1;
            }
        }
    }

    /// Accepts the integrated sub-step of size `h`: energy, state, time.
    pub(super) fn commit(&mut self, h: f64) {
        // The ledger's sums, also booked per element as the heat of the heat ports.
        if self.params.track_energy || self.thermal.is_some() {
            self.stage_forces();
            for (k, law) in self.model.net.laws.iter().enumerate() {
                let p = h * (B[0] * self.sc.law_power[0][k] + B[1] * self.sc.law_power[1][k]);
                let d = h * (B[0] * self.sc.law_diss[0][k] + B[1] * self.sc.law_diss[1][k]);
                match law {
                    Law::Source { .. }
                    | Law::Feedback { .. }
                    | Law::Quadratic { .. }
                    | Law::SpeedTorque { .. }
                    | Law::Engine { .. } => self.energy.input += p,
                    _ => self.energy.dissipated += d,
                }
            }
            // Only sliding elements dissipate (the others' powers are zero).
            for i in bits(self.friction.sliding) {
                self.energy.dissipated += h * (B[0] * self.sc.fric_power[0][i] + B[1] * self.sc.fric_power[1][i]);
            }
            if self.thermal.is_some() {
                self.book_heat(h);
            }
            // Prescribed rows do work rho * lambda: speed sources put it in, kinematic clutches
            // take it out.
            if !self.slots[self.cur].rhs.is_empty() {
                self.stage_torques();
                let s = &self.slots[self.cur];
                for &(ra, src) in s.rhs.iter() {
                    let work = h
                        * (0..2)
                            .map(|i| B[i] * src.rate(&self.model.signals, self.t + C[i] * h).0 * self.sc.lam_st[i][ra])
                            .sum::<f64>();
                    match src {
                        Rhs::Source(_) => self.energy.input += work,
                        Rhs::Clutch(ramp) => {
                            self.energy.dissipated -= work;
                            if let Some(th) = self.thermal.as_deref_mut() {
                                let kin = &self.model.net.kinematic;
                                if let Some(j) = kin.iter().position(|k| k.rho_signal == ramp) {
                                    th.book_kinematic(j, -work);
                                }
                            }
                        }
                    }
                }
            }
        }
        self.phi.copy_from_slice(&self.sc.phi1);
        self.w.copy_from_slice(&self.sc.w1);
        self.friction.zero_slips = None;
        self.t += h;
        if !self.slots[self.cur].linear {
            // The stages (and below, their reduced forces) become the predictor's record: the
            // buffers trade places (the next sub-step writes `q0`, `q` and `stage_g` before it
            // reads them).
            std::mem::swap(&mut self.pred.q0, &mut self.ws.q0);
            std::mem::swap(&mut self.pred.q, &mut self.ws.q);
            // (Only a force start reads them.)
            self.pred.g_ok = self.pred.stage_g_ok && self.pred.force_start;
            if self.pred.g_ok {
                std::mem::swap(&mut self.pred.g, &mut self.ws.stage_g);
            }
            self.pred.h = h;
            self.pred.slot = self.cur;
            self.pred.epoch = self.epoch;
        }
    }

    /// Dense output at `theta` in [0, 1] of the last integrated sub-step into `ws.phi_e/w_e`
    /// (quadratic collocation polynomial through the start and the two stages).
    pub(super) fn dense(&mut self, theta: f64) {
        let [l0, l1, l2] = lagrange(theta);
        for k in 0..self.w.len() {
            self.sc.w_e[k] = l0 * self.w[k] + l1 * self.sc.w_st[0][k] + l2 * self.sc.w_st[1][k];
            self.sc.phi_e[k] = l0 * self.phi[k] + l1 * self.sc.phi_st[0][k] + l2 * self.sc.phi_st[1][k];
        }
    }
}

/// Lagrange weights at `theta` (in units of the sub-step) of the collocation polynomial through
/// the start (`theta = 0`) and the two Gauss stages.
pub(super) fn lagrange(theta: f64) -> [f64; 3] {
    lagrange3([0.0, C[0], C[1]], theta)
}

/// The Lagrange basis of the quadratic through `nodes`, at `x`.
pub(super) fn lagrange3(nodes: [f64; 3], x: f64) -> [f64; 3] {
    let [a, b, c] = nodes;
    [
        (x - b) * (x - c) / ((a - b) * (a - c)),
        (x - a) * (x - c) / ((b - a) * (b - c)),
        (x - a) * (x - b) / ((c - a) * (c - b)),
    ]
}

/// What the residual of a Newton correction ([`Correction`]) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Residual {
    /// `R_i = h sum_j a_ij g_j - Mr (Q_i - q0)`.
    Full,
    /// `R_i = h sum_j a_ij g_j`: the stages are at `q0`, or a force change is mapped.
    Forces,
}

/// One simplified Newton correction of the stages of a mode: what it reads.
pub(super) struct Correction<'a> {
    /// What the residual holds.
    pub(super) residual: Residual,
    /// Sub-step size, s.
    pub(super) h: f64,
    /// Reduced inertia `Mr` (`m x m`), reduced stage forces `stage_g` (`2m`), start `q0` (`m`),
    /// inverse Newton matrix (`2m x 2m`, column-major).
    pub(super) mr: &'a [f64],
    pub(super) gq: &'a [f64],
    pub(super) q0: &'a [f64],
    pub(super) inv: &'a [f64],
}

impl Correction<'_> {
    /// The residual `R` into `res` (`2m`) and `Q += J^-1 R` into the stages `q` (`2m`) of a
    /// mode with `m` free coordinates. Returns the largest correction and the largest updated
    /// stage value. Small modes (`m <= 6`, every shipped vehicle's) run on loops of constant
    /// length, unrolled; the sums run in the same order either way.
    #[inline]
    pub(super) fn apply(&self, m: usize, q: &mut [f64], res: &mut [f64]) -> (f64, f64) {
        match m {
            1 => self.apply_in(1, q, res),
            2 => self.apply_in(2, q, res),
            3 => self.apply_in(3, q, res),
            4 => self.apply_in(4, q, res),
            5 => self.apply_in(5, q, res),
            6 => self.apply_in(6, q, res),
            _ => self.apply_in(m, q, res),
        }
    }

    /// [`Correction::apply`], inlined where `m` is a constant.
    #[inline(always)]
    pub(super) fn apply_in(&self, m: usize, q: &mut [f64], res: &mut [f64]) -> (f64, f64) {
        let (h, mm) = (self.h, 2 * m);
        let (mr, gq, q0, inv) = (&self.mr[..m * m], &self.gq[..mm], &self.q0[..m], &self.inv[..mm * mm]);
        let (q, res) = (&mut q[..mm], &mut res[..mm]);
        for i in 0..2 {
            let (ha0, ha1) = (h * A[i][0], h * A[i][1]);
            for a in 0..m {
                let f = ha0 * gq[a] + ha1 * gq[m + a];
                res[i * m + a] = match self.residual {
                    Residual::Forces => f,
                    Residual::Full => {
                        let qi = &q[i * m..(i + 1) * m];
                        let mq: f64 = mr[a * m..(a + 1) * m]
                            .iter()
                            .zip(qi.iter().zip(q0))
                            .map(|(mr, (q, q0))| mr * (q - q0))
                            .sum();
                        f - mq
                    }
                };
            }
        }
        let (mut norm_dq, mut norm_q) = (0.0f64, 0.0f64);
        // (`max` passes over a NaN: the sum of the corrections carries one, or an overflow.)
        let mut sum = 0.0f64;
        let mut update = |k: usize, dq: f64| {
            q[k] += dq;
            sum += dq;
            norm_dq = norm_dq.max(dq.abs());
            norm_q = norm_q.max(q[k].abs());
        };
        // `dq_k = sum_j inv_kj res_j`, each summed over ascending `j` from -0.0 (as
        // `Iterator::sum` adds). Small modes run the columns with all `2m` sums at once: the
        // sums are independent, so they overlap instead of each waiting on its last addition.
        const LANES: usize = 12;
        if mm <= LANES && mm > 0 {
            let mut acc = [-0.0f64; LANES];
            let acc = &mut acc[..mm];
            for (col, &r) in inv.chunks_exact(mm).zip(res.iter()) {
                for (a, c) in acc.iter_mut().zip(col) {
                    *a += c * r;
                }
            }
            for (k, &dq) in acc.iter().enumerate() {
                update(k, dq);
            }
        } else {
            for k in 0..mm {
                update(k, (0..mm).map(|j| inv[j * mm + k] * res[j]).sum());
            }
        }
        // (An iterate grown past any number has diverged too.)
        if !(sum.is_finite() && norm_q.is_finite()) {
            norm_dq = f64::INFINITY;
        }
        (norm_dq, norm_q)
    }
}
