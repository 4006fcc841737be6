//! Force evaluation: element torques at the stages and the end, constraint torques, Jacobians.

use super::*;

impl Simulation {
    /// Reduced Jacobians `Dr = N^T df/dw N`, `Kr = N^T df/dphi N` at the given state.
    pub(super) fn jacobians(&mut self, slot: usize, t_sig: usize) {
        self.jacobians_at(slot, t_sig, false);
    }

    /// [`Simulation::jacobians`] at the state `ws.phi1/w1` (`at_scratch`) instead of the
    /// current one: the Newton iteration's own point ([`Simulation::jacobians_at_iterate`]).
    fn jacobians_at(&mut self, slot: usize, t_sig: usize, at_scratch: bool) {
        self.stats.jacobian_updates += 1;
        let n = self.model.n_dof;
        let set = self.newton_of(slot);
        let Work { f, sig, .. } = &mut self.ws;
        let Scratch { jac_phi: jphi, jac_w: jw, phi1, w1, .. } = &mut *self.sc;
        let (phi, w): (&[f64], &[f64]) = if at_scratch { (phi1, w1) } else { (&self.phi, &self.w) };
        jphi[..n * n].fill(0.0);
        jw[..n * n].fill(0.0);
        f.fill(0.0);
        let mut jac = Jacobian { n, dphi: jphi, dw: jw };
        for (k, law) in self.model.net.laws.iter().enumerate() {
            law.eval(phi, w, &sig[t_sig], self.regimes[k], f, Some(&mut jac));
        }
        // Speed-dependent sliding friction: tau = dir * k(|w_rel|), force -row^T tau.
        for (i, fe) in self.model.net.friction.iter().enumerate() {
            let dir = self.modes[i].dir();
            if dir != 0.0 && !fe.law.is_speed_independent() {
                let wr = fe.row.dot(w);
                let (_, dk) = fe.law.kinetic(&sig[t_sig], wr.abs(), w);
                // d tau / d w_rel = dir * dk * sign(w_rel) = dk while sliding in direction dir.
                for &(a, ca) in &fe.row.entries {
                    for &(b, cb) in &fe.row.entries {
                        if ca != 0.0 && cb != 0.0 && a < n && b < n {
                            jac.dw[a * n + b] -= ca * cb * dk;
                        }
                    }
                }
            }
        }
        self.slots[slot].jac_uses = 0;
        // N^T J N over the non-zeros of J (a few per element law) and of N's rows (mostly one:
        // a dependent speed follows one free speed). Each entry of `Dr`, `Kr` sums its terms in
        // ascending (i, j), as a dense product skipping zeros would.
        let s = &mut self.slots[slot];
        let c = &*s.mode;
        let m = c.m;
        let NewtonFactors { dr, kr, .. } = &mut self.newton.sets[set];
        dr[..m * m].fill(0.0);
        kr[..m * m].fill(0.0);
        let row = |k: usize| &c.basis.nz[c.basis.nz_row[k] as usize..c.basis.nz_row[k + 1] as usize];
        for i in 0..n {
            let ni = row(i);
            if ni.is_empty() {
                continue;
            }
            for j in 0..n {
                let (dw, dp) = (jw[i * n + j], jphi[i * n + j]);
                if dw == 0.0 && dp == 0.0 {
                    continue;
                }
                for &(_, a, na) in ni {
                    for &(_, b, nb) in row(j) {
                        let ab = a as usize * m + b as usize;
                        dr[ab] += na * dw * nb;
                        kr[ab] += na * dp * nb;
                    }
                }
            }
        }
        // ||Mr^-1 Kr||_inf bounds every eigenvalue -omega^2 of the undamped motion, column by
        // column of Mr^-1 Kr (once per Jacobian: m solves of size m).
        let Scratch { scratch_n: col, acc: rows, .. } = &mut *self.sc;
        rows[..m].fill(0.0);
        for b in 0..m {
            for a in 0..m {
                col[a] = kr[a * m + b];
            }
            if col[..m].iter().any(|&v| v != 0.0) {
                linalg::lu_solve(&c.mr_lu, m, &c.mr_piv, &mut col[..m]);
                for a in 0..m {
                    rows[a] += col[a].abs();
                }
            }
        }
        s.omega2 = rows[..m].iter().fold(0.0, |x: f64, &r| x.max(r));
    }

    /// The Jacobian of a nonlinear mode at the Newton iterate of a sub-step of `h`: at the mean
    /// of its two stage states (formed from `ws.q` into `ws.phi1/w1`, which the sub-step's end
    /// values overwrite after the iteration), with the first stage's signals.
    pub(super) fn jacobians_at_iterate(&mut self, slot: usize, h: f64) {
        self.stage_states(h);
        let n = self.model.n_dof;
        let Scratch { phi_st, w_st, phi1, w1, .. } = &mut *self.sc;
        for k in 0..n {
            phi1[k] = 0.5 * (phi_st[0][k] + phi_st[1][k]);
            w1[k] = 0.5 * (w_st[0][k] + w_st[1][k]);
        }
        self.jacobians_at(slot, 0, true);
    }

    /// Generalised forces at (phi, w) with signals `sig`, modes and regimes as they are.
    /// Fills `f` (all nodes) and, when `powers` is set, per-law power and dissipation.
    pub(super) fn forces(
        net: &Network,
        modes: &[FrictionMode],
        sliding: u64,
        regimes: &[LawState],
        phi: &[f64],
        w: &[f64],
        sig: &[f64],
        f: &mut [f64],
        record: Record,
    ) {
        // One body per kind of record, its writes fixed at compile time.
        match record {
            Record::Nothing => Self::forces_in::<NO_RECORD>(
                net,
                modes,
                sliding,
                regimes,
                phi,
                w,
                sig,
                f,
                [&mut [], &mut [], &mut [], &mut []],
            ),
            Record::Powers(p, d, fp, ft) => {
                Self::forces_in::<POWERS>(net, modes, sliding, regimes, phi, w, sig, f, [p, d, fp, ft])
            }
            Record::Torques(tau, d, ft, fp) => {
                Self::forces_in::<TORQUES>(net, modes, sliding, regimes, phi, w, sig, f, [tau, d, ft, fp])
            }
        }
    }

    /// [`Simulation::forces`] for one kind of record: `rec` holds its four slices in the order
    /// of its variant ([`Record`]), empty for `NO_RECORD`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn forces_in<const REC: u8>(
        net: &Network,
        modes: &[FrictionMode],
        sliding: u64,
        regimes: &[LawState],
        phi: &[f64],
        w: &[f64],
        sig: &[f64],
        f: &mut [f64],
        rec: [&mut [f64]; 4],
    ) {
        let [r0, r1, r2, r3] = rec;
        f.fill(0.0);
        for (k, law) in net.laws.iter().enumerate() {
            let o = law.force(phi, w, sig, regimes[k], f);
            match REC {
                // Powers: law power and dissipation.
                POWERS => {
                    r0[k] = o.power;
                    r1[k] = o.dissipation;
                }
                // Torques: law torque and dissipation.
                TORQUES => {
                    r0[k] = o.tau;
                    r1[k] = o.dissipation;
                }
                _ => {}
            }
        }
        // Stuck and free elements carry no applied torque (a stuck one's is a constraint torque):
        // only the sliding elements' entries of the friction records are written, and only
        // theirs are ever read (the ledger and the outputs visit the sliding elements).
        for i in bits(sliding) {
            let fe = &net.friction[i];
            let wr = fe.row.dot(w);
            let tk = fe.law.kinetic_torque(sig, wr.abs(), w);
            let tau = modes[i].dir() * tk;
            fe.row.add_scaled(f, -tau);
            let power = tau * wr; // dissipated
            match REC {
                // Powers: friction dissipation and torque.
                POWERS => {
                    r2[i] = power;
                    r3[i] = tau;
                }
                // Torques: friction torque and dissipation.
                TORQUES => {
                    r2[i] = tau;
                    r3[i] = power;
                }
                _ => {}
            }
        }
    }

    /// Rolling LossyGears: adds the loss torque `-tauLoss L^T` (`L = w_a - w_s`), where
    /// `tauLoss = k tau_a + c` in the quadrant in force and `tau_a` is the torque the gear
    /// transmits, itself depending on `tauLoss` through the constraint torque of the gear row:
    /// the affine relation is solved exactly, and the quadrant is re-chosen if the result lies
    /// in the other one (the law is continuous there). Several rolling lossy gears are resolved
    /// one after the other (Gauss-Seidel sweeps).
    ///
    /// Sliding limited-slip packs are resolved the same way: their torque
    /// `dir (preload + ramp |T_in|) / 2` depends on the input torque `T_in = sum c lambda_row`,
    /// itself affine in the pack torque; the sign case of `T_in` is chosen consistently.
    ///
    /// `fp` gets the friction power, `tau_out` the friction torque of each corrected element.
    /// `mask`: the torque-dependent elements that slide under `modes` (the others are skipped).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn torque_dependent_correct(
        net: &Network,
        s: &ModeSlot,
        modes: &[FrictionMode],
        mask: u64,
        w: &[f64],
        f: &mut [f64],
        a: &mut [f64],
        tau_out: &mut [f64],
        mut fp: Option<&mut [f64]>,
    ) {
        let n = net.n_dof;
        // lambda of permanent row `g` for generalised force x: T_g . x.
        let lam_of = |x: &dyn Fn(usize) -> f64, g: usize, _a: &mut [f64]| -> f64 {
            (0..n).map(|k| s.tmap[k * s.rstride + g] * x(k)).sum()
        };
        for i in bits(mask) {
            let fe = &net.friction[i];
            let dir = modes[i].dir();
            if let crate::elements::FrictionLaw::Ramp { input, .. } = &fe.law {
                // T_in(tau) = A - tau B for the pack force -tau row^T added to f.
                let lt = |k: usize| if k < n { row_coef(&fe.row, k) } else { 0.0 };
                let fl = |k: usize| f[k];
                let (mut ta, mut tb) = (0.0, 0.0);
                for &(r, c) in input {
                    if c != 0.0 {
                        ta += c * lam_of(&fl, r, a);
                        tb += c * lam_of(&lt, r, a);
                    }
                }
                let solve = |sgn: f64| {
                    let (p, ramp) = match fe.law {
                        crate::elements::FrictionLaw::Ramp { preload, power, coast, .. } => {
                            (preload, if sgn >= 0.0 { power } else { coast })
                        }
                        _ => (0.0, 0.0),
                    };
                    // tau = dir (p + ramp sgn (A - tau B)) / 2
                    let tau = dir * (p + ramp * sgn * ta) / 2.0 / (1.0 + dir * ramp * sgn * tb / 2.0);
                    (tau, sgn * (ta - tau * tb) >= 0.0)
                };
                let s0 = if ta >= 0.0 { 1.0 } else { -1.0 };
                let (t0, ok0) = solve(s0);
                let tau = if ok0 {
                    t0
                } else {
                    let (t1, ok1) = solve(-s0);
                    if ok1 { t1 } else { dir * fe.law.ramp_limit(0.0).unwrap_or(0.0) }
                };
                fe.row.add_scaled(f, -tau);
                tau_out[i] = tau;
                if let Some(p) = fp.as_mut() {
                    p[i] = tau * fe.row.dot(w);
                }
                continue;
            }
            let crate::elements::FrictionLaw::Lossy { table, gear_row } = &fe.law else { continue };
            let wr = fe.row.dot(w);
            let quads = table.at(wr.abs());
            let fl = |k: usize| f[k];
            let lam_f = lam_of(&fl, *gear_row, a);
            let lt = |k: usize| if k < n { row_coef(&fe.row, k) } else { 0.0 };
            let lam_l = lam_of(&lt, *gear_row, a);
            let solve = |qd: u8| {
                let (k, c) = quads.coefficients(qd);
                let tau = (c - k * lam_f) / (1.0 - k * (1.0 + lam_l));
                (tau, tau * (1.0 + lam_l) - lam_f)
            };
            let q0 = if dir > 0.0 { 1 } else { 4 };
            let (mut tau, tau_a) = solve(q0);
            let qd = quads.quadrant(dir, tau_a);
            if qd != q0 {
                tau = solve(qd).0;
            }
            fe.row.add_scaled(f, -tau);
            tau_out[i] = tau;
            if let Some(p) = fp.as_mut() {
                p[i] = tau * wr;
            }
        }
    }

    /// Forces (and per-element powers) at the converged stages, once per sub-step.
    pub(super) fn stage_forces(&mut self) {
        if self.ws.cached.has(Cached::STAGE_FORCES) {
            return;
        }
        for i in 0..2 {
            self.stage_force(i);
        }
        self.ws.cached.insert(Cached::STAGE_FORCES);
    }

    /// Forces and per-element powers at stage `i` of the current sub-step (its angles, speeds
    /// and signals), into the stage-force cache, torque-dependent friction corrected.
    #[inline(always)]
    pub(super) fn stage_force(&mut self, i: usize) {
        let Work { sig, fric_tau, .. } = &mut self.ws;
        let Scratch { phi_st, w_st, f_st, law_power, law_diss, fric_power, .. } = &mut *self.sc;
        Self::forces(
            &self.model.net,
            &self.modes,
            self.friction.sliding,
            &self.regimes,
            &phi_st[i],
            &w_st[i],
            &sig[i],
            &mut f_st[i],
            Record::Powers(&mut law_power[i], &mut law_diss[i], &mut fric_power[i], &mut fric_tau[i]),
        );
        if self.model.torque_dependent & self.friction.sliding != 0 {
            let Work { dep_tau, .. } = &mut self.ws;
            let Scratch { w_st, f_st, dep_scratch: ls_a, fric_power, .. } = &mut *self.sc;
            Self::torque_dependent_correct(
                &self.model.net,
                &self.slots[self.cur],
                &self.modes,
                self.model.torque_dependent & self.friction.sliding,
                &w_st[i],
                &mut f_st[i],
                ls_a,
                dep_tau,
                Some(&mut fric_power[i]),
            );
        }
    }

    /// Constraint torques at the converged stages, once per sub-step: of every row when the
    /// slot asks for them all ([`ModeSlot::stage_rows_all`]), else of the lock rows and the
    /// rows their limits read (the others are left as they were; nothing reads them).
    pub(super) fn stage_torques(&mut self) {
        if self.ws.cached.has(Cached::STAGE_TORQUES) {
            return;
        }
        self.stage_forces();
        let n = self.model.n_dof;
        let s = &*self.slots[self.cur].mode;
        for i in 0..2 {
            let Work { presc_acc: ud, .. } = &mut self.ws;
            let Scratch { f_st, acc, xnz, lam_st, .. } = &mut *self.sc;
            if s.stage_rows_all {
                Self::constraint_torques(&self.model.net, s, &f_st[i], &ud[i], acc, xnz, &mut lam_st[i], n);
                continue;
            }
            // No prescribed rows here: the map applies to the forces themselves.
            let xnz = nonzeros(&f_st[i][..n], xnz);
            let np = self.model.net.rows.len();
            map_columns_from(&s.tmap, s.rstride, xnz, np, &mut lam_st[i][np..s.r]);
            for &g in s.stage_extra.iter() {
                let g = g as usize;
                // Ascending columns from +0.0, as `map_columns` sums each row.
                lam_st[i][g] = xnz.iter().fold(0.0, |acc, &(k, v)| acc + s.tmap[k as usize * s.rstride + g] * v);
            }
        }
        self.ws.cached.insert(Cached::STAGE_TORQUES);
    }

    /// Forces and constraint torques at the sub-step end (left-limit signals), once per sub-step.
    pub(super) fn end_torques(&mut self) {
        if self.ws.cached.has(Cached::END) {
            return;
        }
        let n = self.model.n_dof;
        let Work {
            presc_acc: ud,
            sig_end,
            f_end,
            lam_end,
            dep_tau_end,
            fric_power_end,
            law_tau_end,
            law_diss_end,
            fric_tau_end,
            ..
        } = &mut self.ws;
        let Scratch { phi1, w1, acc, xnz, dep_scratch: ls_a, .. } = &mut *self.sc;
        let record = Record::Torques(law_tau_end, law_diss_end, fric_tau_end, fric_power_end);
        Self::forces(
            &self.model.net,
            &self.modes,
            self.friction.sliding,
            &self.regimes,
            phi1,
            w1,
            sig_end,
            f_end,
            record,
        );
        if self.model.torque_dependent & self.friction.sliding != 0 {
            Self::torque_dependent_correct(
                &self.model.net,
                &self.slots[self.cur],
                &self.modes,
                self.model.torque_dependent & self.friction.sliding,
                w1,
                f_end,
                ls_a,
                dep_tau_end,
                Some(fric_power_end),
            );
        }
        Self::constraint_torques(&self.model.net, &self.slots[self.cur].mode, f_end, &ud[2], acc, xnz, lam_end, n);
        self.ws.cached.insert(Cached::END);
    }

    /// Constraint torques `lambda` of the current mode at `(phi_e, w_e)` with signals `sig[2]`.
    pub(super) fn constraint_torques_at_e(&mut self, t: f64) {
        let n = self.model.n_dof;
        self.prescribed(t, 3);
        let Work { presc_acc: ud, sig, f, lam, dep_tau, .. } = &mut self.ws;
        let Scratch { phi_e, w_e, acc, xnz, dep_scratch: ls_a, .. } = &mut *self.sc;
        Self::forces(
            &self.model.net,
            &self.modes,
            self.friction.sliding,
            &self.regimes,
            phi_e,
            w_e,
            &sig[2],
            f,
            Record::Nothing,
        );
        let dependent = self.model.torque_dependent & self.friction.sliding;
        if dependent != 0 {
            let s = &self.slots[self.cur];
            Self::torque_dependent_correct(&self.model.net, s, &self.modes, dependent, w_e, f, ls_a, dep_tau, None);
        }
        Self::constraint_torques(&self.model.net, &self.slots[self.cur].mode, f, &ud[3], acc, xnz, lam, n);
    }

    /// Prescribed parts of speed and acceleration at `t` into `wp[idx]`, `ud[idx]`.
    pub(super) fn prescribed(&mut self, t: f64, idx: usize) {
        self.prescribed_in(self.cur, t, idx);
    }

    pub(super) fn prescribed_in(&mut self, slot: usize, t: f64, idx: usize) {
        let n = self.model.n_dof;
        let s = &self.slots[slot];
        if s.rhs.is_empty() {
            return;
        }
        let (wp, ud) = (&mut self.ws.presc_speed[idx], &mut self.ws.presc_acc[idx]);
        wp[..n].fill(0.0);
        ud[..n].fill(0.0);
        for (j, &(_, src)) in s.rhs.iter().enumerate() {
            let (rho, drho) = src.rate(&self.model.signals, t);
            for k in 0..n {
                let p = s.pmat[j * n + k];
                if p != 0.0 {
                    wp[k] += p * rho;
                    ud[k] += p * drho;
                }
            }
        }
    }

    /// `lambda = L (M a - f)` with `a = N Mr^-1 N^T (f - M ud) + ud`, `ud` the prescribed part
    /// of the acceleration (zero without prescribed rows), for every active row.
    pub(super) fn constraint_torques(
        net: &Network,
        s: &CompiledMode,
        f: &[f64],
        ud: &[f64],
        acc: &mut [f64],
        xnz: &mut [(u32, f64)],
        lam: &mut [f64],
        n: usize,
    ) {
        let x = if s.rhs.is_empty() {
            &f[..n]
        } else {
            for k in 0..n {
                acc[k] = f[k] - net.mass[k] * ud[k];
            }
            &acc[..n]
        };
        map_columns(&s.tmap, s.rstride, nonzeros(x, xnz), &mut lam[..s.r]);
    }
}

/// [`Simulation::forces_in`] kinds: no record, [`Record::Powers`], [`Record::Torques`].
pub(super) const NO_RECORD: u8 = 0;

pub(super) const POWERS: u8 = 1;

pub(super) const TORQUES: u8 = 2;

/// What a force evaluation records per element besides the nodal forces. The friction
/// records hold the sliding elements' entries only (the others keep stale values nobody reads).
pub(super) enum Record<'a> {
    Nothing,
    /// Stage records: law power, law dissipation, friction dissipation (the energy ledger),
    /// friction torque (the stage predictor's input steps).
    Powers(&'a mut [f64], &'a mut [f64], &'a mut [f64], &'a mut [f64]),
    /// Telemetry at a sub-step end: law torque, law dissipation, friction torque, friction
    /// dissipation.
    Torques(&'a mut [f64], &'a mut [f64], &'a mut [f64], &'a mut [f64]),
}

/// Source of a prescribed row's right-hand side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Rhs {
    /// A speed or position source (does work: input).
    Source(crate::network::Prescribed),
    /// An engaging kinematic clutch, ramp signal index (takes work out: dissipated).
    Clutch(usize),
}

impl Rhs {
    pub(super) fn rate(&self, signals: &[Signal], t: f64) -> (f64, f64) {
        match *self {
            Rhs::Source(p) => p.rate(signals, t),
            Rhs::Clutch(k) => (signals[k].eval(t), signals[k].derivative(t)),
        }
    }
}

pub(super) fn row_coef(row: &crate::elements::Row, k: usize) -> f64 {
    row.entries.iter().filter(|e| e.0 == k && e.1 != 0.0).map(|e| e.1).sum()
}
