//! Mode selection: the coupled stick-slip complementarity problem and the checks that skip it.

use super::*;

impl Simulation {
    /// Holds the base slot's mode for its complementarity data (`W` and `B`, derived when the
    /// mode was compiled: [`CompiledMode::qp_w`]), until the base changes.
    #[inline]
    pub(super) fn compute_qp(&mut self, base: usize) {
        if !Arc::ptr_eq(&self.qp, &self.slots[base].mode) {
            self.qp = self.slots[base].mode.clone();
        }
    }

    /// Static capacity of friction element `i` under signals `sig`: with steady signals, the
    /// one the last full pass (a mode selection or an input-change test) computed.
    #[inline]
    pub(super) fn capacity(&self, i: usize, sig: &[f64]) -> Capacity {
        if self.signals.unsteady.is_empty() && self.capacities.all_generation == self.signals.generation {
            self.ws.caps[i]
        } else {
            self.model.net.friction[i].law.capacity(sig)
        }
    }

    /// True when the current mode's minimum-norm split (`lam` at speeds `w`) holds every lock
    /// strictly inside its static limit (capacities from `cap`), with a margin of 1e-9 of the
    /// limit. A LossyGear's bounds move with the split itself: never certified here.
    pub(super) fn min_norm_inside(&self, lam: &[f64], cap: impl Fn(usize) -> Capacity) -> bool {
        let np = self.model.net.rows.len();
        self.slots[self.cur].locked.iter().enumerate().all(|(pos, &i)| {
            let law = &self.model.net.friction[i].law;
            if matches!(law, crate::elements::FrictionLaw::Lossy { .. }) {
                return false;
            }
            let (g, limit) = law.hold_excess(cap(i), lam[np + pos], lam);
            g < -1e-9 * limit.max(1e-300)
        })
    }

    /// Resolves the modes of all friction elements at the current time and state.
    /// `forced` marks elements whose slip just crossed zero (they become stuck candidates).
    pub(super) fn select_modes(&mut self, forced: u64, initial: bool) {
        self.epoch += 1;
        // The record of the input steps' force changes lists the sliding elements of before.
        self.inputs.changes_ready = ChangeRecord::NotFormed;
        self.friction.zero_slips = None;
        let n = self.model.n_dof;
        let nf = self.model.net.friction.len();
        // Energy just before the instant (left-limit signals, old regimes and modes): what the
        // switch removes (a lock impact, a released backlash spring, a limit step) is dissipated.
        self.fill_signals(0, self.t, true);
        let (ke0, pe0) = self.kinetic_potential(0);
        self.fill_signals(2, self.t, false);
        // Law regimes from the state.
        for k in 0..self.model.net.laws.len() {
            let law = &self.model.net.laws[k];
            let new = law.next_regime(self.regimes[k], &self.phi, &self.w, &self.ws.sig[2]);
            if new != self.regimes[k].regime {
                // The law's Jacobian changed: every cached Newton matrix is stale.
                for slot in &mut self.slots {
                    slot.newton_h = f64::NAN;
                }
                let from = self.law_mode(k);
                let law = &self.model.net.laws[k];
                law.enter(&mut self.regimes[k], new, &self.phi, &self.w, &self.ws.sig[2]);
                if let (Some(from), Some(to)) = (from, self.law_mode(k))
                    && from != to
                    && !initial
                    && self.events.has_room()
                {
                    let element = self.model.net.law_element[k];
                    self.events.push(ModeEvent { time: self.t, element, from, to });
                }
            }
        }
        self.switch_kinematic_clutches(initial);
        let wscale = self.w[..n].iter().fold(1.0f64, |s, v| s.max(v.abs()));
        let tol_w = 1e-12 * wscale;
        let mut any_candidate = false;
        for i in 0..nf {
            let fe = &self.model.net.friction[i];
            let cap = fe.law.capacity(&self.ws.sig[2]);
            self.ws.caps[i] = cap;
            let wr = fe.row.dot(&self.w);
            self.sc.qp.candidate[i] = false;
            self.sc.qp.new_modes[i] = if cap.free {
                FrictionMode::Free
            } else if forced & (1 << i) != 0 || wr.abs() <= tol_w || (self.modes[i] == FrictionMode::Stuck && !initial)
            {
                self.sc.qp.candidate[i] = true;
                any_candidate = true;
                FrictionMode::Stuck
            } else if wr > 0.0 {
                FrictionMode::Forward
            } else if cap.one_way {
                // A freewheel never slides backwards: it locks (the projection is the impact).
                self.sc.qp.candidate[i] = true;
                any_candidate = true;
                FrictionMode::Stuck
            } else {
                FrictionMode::Backward
            };
        }
        self.capacities.all_generation = self.signals.generation;
        self.capacities.stale = Some(0);
        if any_candidate {
            // Forces with the sliding torques of the non-candidates, none from candidates.
            let saved = std::mem::take(&mut self.modes);
            let mut tmp_modes = std::mem::take(&mut self.sc.qp.new_modes);
            {
                let Work { sig, f, .. } = &mut self.ws;
                let Scratch { qp: QpScratch { candidate, .. }, .. } = &mut *self.sc;
                // Candidates carry no torque in b: give them Free for the force evaluation.
                for i in 0..nf {
                    if candidate[i] {
                        tmp_modes[i] = FrictionMode::Free;
                    }
                }
                let sliding = sliding_mask(&tmp_modes);
                Self::forces(
                    &self.model.net,
                    &tmp_modes,
                    sliding,
                    &self.regimes,
                    &self.phi,
                    &self.w,
                    &sig[2],
                    f,
                    Record::Nothing,
                );
                for i in 0..nf {
                    if candidate[i] {
                        tmp_modes[i] = FrictionMode::Stuck;
                    }
                }
            }
            self.sc.qp.new_modes = tmp_modes;
            self.modes = saved;
            // The problem is posed under the base constraints: permanent rows and engaged
            // kinematic clutches (with their prescribed accelerations).
            let base_key = Self::lock_key(&[], &self.kin_engaged) << self.model.net.friction.len();
            let base = self.slot_for(base_key);
            let dependent = self.model.torque_dependent & sliding_mask(&self.sc.qp.new_modes);
            if dependent != 0 {
                let Work { f, dep_tau, .. } = &mut self.ws;
                let Scratch { dep_scratch: ls_a, qp: QpScratch { new_modes, .. }, .. } = &mut *self.sc;
                Self::torque_dependent_correct(
                    &self.model.net,
                    &self.slots[base],
                    new_modes,
                    dependent,
                    &self.w,
                    f,
                    ls_a,
                    dep_tau,
                    None,
                );
            }
            self.compute_qp(base);
            self.prescribed_in(base, self.t, 3);
            self.resolve_candidates(base);
        }
        // A selection that the motion contradicted at once (see `FrictionSets::flip`).
        let (flip, hold) = (std::mem::take(&mut self.friction.flip), std::mem::take(&mut self.friction.hold));
        for i in bits((flip | hold) & low_bits(nf)) {
            let m = &mut self.sc.qp.new_modes[i];
            *m = match *m {
                _ if hold & 1 << i != 0 && *m != FrictionMode::Free => FrictionMode::Stuck,
                FrictionMode::Forward => FrictionMode::Backward,
                FrictionMode::Backward => FrictionMode::Forward,
                other => other,
            };
        }
        // Apply: compile/fetch the mode, project speeds onto new locks, record events.
        let new_key = Self::lock_key(&self.sc.qp.new_modes, &self.kin_engaged);
        let old_key = if self.slots[self.cur].valid { self.slots[self.cur].key } else { 0 };
        if new_key != self.slots[self.cur].key || !self.slots[self.cur].valid || initial {
            self.cur = self.slot_for(new_key);
        }
        if new_key & !old_key != 0 || initial {
            self.project();
        }
        // An element that slides against the sign of its slip (the impact of a new lock moved
        // it off zero the other way, or a slip within the location tolerance of zero had the
        // other sign): its slip is projected to zero too, as if it locked at the instant and
        // broke away. Left as it was, the slip would read as a reversal at the very start of
        // the next sub-step, the selection would repeat without the clock moving, and the step
        // would run into the Zeno guard in a mode that pushes the slip the wrong way (the
        // 350Z's braked rear tyre near standstill at 1/60 s ran away so).
        let mut against = 0u64;
        for i in 0..nf {
            let dir = self.sc.qp.new_modes[i].dir();
            if dir != 0.0 && dir * self.model.net.friction[i].row.dot(&self.w) < 0.0 {
                against |= 1 << i;
            }
        }
        if against != 0 {
            self.cur = self.slot_for(new_key | against);
            self.project();
            self.cur = self.slot_for(new_key);
        }
        for i in 0..nf {
            let (from, to) = (self.modes[i], self.sc.qp.new_modes[i]);
            if from != to || initial {
                if !initial && self.events.has_room() {
                    self.events.push(ModeEvent { time: self.t, element: self.model.net.friction[i].element, from, to });
                }
                self.modes[i] = to;
            }
        }
        self.friction.sliding = sliding_mask(&self.modes);
        self.friction.free = mask_where(&self.modes, |&m| m == FrictionMode::Free);
        if !initial {
            let (ke1, pe1) = self.kinetic_potential(2);
            self.energy.dissipated += (ke0 + pe0) - (ke1 + pe1);
        }
    }

    /// After run-time inputs changed: true when no mode or regime changes at once under the new
    /// signals, so the complementarity solve can be skipped: no element gains or loses its
    /// normal force, no law changes regime, every sliding element still slips. Stuck elements
    /// are not tested here: their torques need a force evaluation, and the break-away samples
    /// of the sub-step do it anyway ([`Simulation::locate`] puts a limit already exceeded at
    /// the sub-step start at `theta = 0`, where the modes are selected before any motion). The
    /// energy a limit step removes is booked as `select_modes` would. Conservative: kinematic
    /// clutches and stuck LossyGears (whose limits move with the split) take the full solve.
    pub(super) fn input_change_keeps_modes(&mut self) -> bool {
        if !self.model.net.kinematic.is_empty() {
            return false;
        }
        let t = self.t;
        self.fill_signals(2, t, false);
        for (k, law) in self.model.net.laws.iter().enumerate() {
            if law.has_regimes()
                && law.next_regime(self.regimes[k], &self.phi, &self.w, &self.ws.sig[2]) != self.regimes[k].regime
            {
                return false;
            }
        }
        // With steady signals and only inputs set by id changed since the last full pass, the
        // elements that read none of them keep their capacity (and their free or stuck mode;
        // a sliding one's direction is checked below whatever its inputs did).
        // A stuck LossyGear always takes a new mode selection (its bounds move with the
        // transmitted torque): visited whatever changed.
        let all = low_bits(self.model.net.friction.len());
        let visit = match self.capacities.stale {
            Some(m) if self.signals.unsteady.is_empty() && self.capacities.all_generation != u64::MAX => {
                m | self.model.lossy
            }
            _ => all,
        };
        // The sliding elements whose inputs did not change keep their capacity; their slip
        // direction is checked all the same.
        for i in bits(self.friction.sliding & !visit) {
            let wr = self.model.net.friction[i].row.dot(&self.w);
            if wr == 0.0 || wr.signum() != self.modes[i].dir() {
                return false;
            }
        }
        for i in bits(visit) {
            let fe = &self.model.net.friction[i];
            let cap = fe.law.capacity(&self.ws.sig[2]);
            self.ws.caps[i] = cap;
            match self.modes[i] {
                FrictionMode::Free => {
                    if !cap.free {
                        return false;
                    }
                }
                FrictionMode::Stuck => {
                    if cap.free || matches!(fe.law, crate::elements::FrictionLaw::Lossy { .. }) {
                        return false;
                    }
                }
                m => {
                    let wr = fe.row.dot(&self.w);
                    if cap.free || wr == 0.0 || wr.signum() != m.dir() {
                        return false;
                    }
                }
            }
        }
        self.capacities.all_generation = self.signals.generation;
        self.capacities.stale = Some(0);
        // What a step in a limit removes (none for the kept modes but an elastic clutch's
        // stored T_s^2 / 2S): booked like a mode switch.
        // Only potentials read signals (the kinetic energy is the same on both sides).
        let signal_potential =
            self.model.net.laws.iter().any(|l| matches!(l, Law::ElasticClutch { .. } | Law::Dog { .. }));
        if self.params.track_energy && signal_potential {
            self.fill_signals(0, t, true);
            let (_, pe0) = self.kinetic_potential(0);
            let (_, pe1) = self.kinetic_potential(2);
            self.energy.dissipated += pe0 - pe1;
        }
        true
    }

    /// At the start of a step after inputs changed: the predictor is told to follow the steps,
    /// and the modes are selected again unless they are known to hold with the new inputs.
    /// (Out of line: inlined, it changed the code generated for the rest of `step` by more than
    /// its own cost.)
    #[inline(never)]
    pub(super) fn after_input_change(&mut self) {
        self.inputs.changed = false;
        // The first sub-step's predictor follows the recorded input steps.
        self.inputs.jump = self.params.newton_start != NewtonStart::Extrapolate && !self.inputs.steps.is_empty();
        if !self.input_change_keeps_modes() || self.input_step_breaks_a_lock() {
            self.select_modes(0, false);
        }
    }

    /// After an input change that keeps the modes: true when a lock's torque right after the
    /// change, at the step start, is past its static limit there. MSL re-evaluates the modes at
    /// a discontinuity; the sub-step's own samples would see the excess only if it lasted until
    /// its first stage, and a lock whose torque relaxes faster (a stiff damper, a sliding
    /// tyre's slip) would then hold through a torque it cannot carry.
    ///
    /// The torques come from the last step's end, `lambda(t0+) = lambda(t0-) + T dF`, where
    /// `dF` is the force change of the stepped inputs (torque sources and engine throttles by
    /// [`Law::signal_step`], sliding clutches, brakes and tyres by their proportionality to
    /// the stepped force); when those end torques do not describe this state, or a stepped
    /// input's force change is not known that way, the forces are evaluated at the start.
    pub(super) fn input_step_breaks_a_lock(&mut self) -> bool {
        let s = &self.slots[self.cur];
        if s.locked.is_empty() {
            return false;
        }
        let (r, rs, n) = (s.r, s.rstride, self.model.n_dof);
        let end_valid = self.ws.cached.has(Cached::END)
            && s.rhs.is_empty()
            && self.model.torque_dependent & self.friction.sliding == 0;
        let known = self.input_changes();
        let s = &self.slots[self.cur];
        // The force change, node by node (a few entries).
        let mut df = [(0u32, 0.0f64); 16];
        let mut len = 0;
        let mut fits = true;
        let mut push = |node: usize, v: f64| {
            if node >= n || v == 0.0 {
                return;
            }
            if len == df.len() {
                fits = false;
                return;
            }
            df[len] = (node as u32, v);
            len += 1;
        };
        for &change in self.inputs.changes.iter() {
            match change {
                InputStepChange::Law(a, b, d) => {
                    push(a, d);
                    push(b, -d);
                }
                InputStepChange::Friction(i, ratio) => {
                    // The element's force is -tau row^T.
                    let d = -self.ws.fric_tau_end[i] * ratio;
                    for &(node, c) in self.model.net.friction[i].row.entries.iter().take_while(|e| e.1 != 0.0) {
                        push(node, c * d);
                    }
                }
            }
        }
        let exact = end_valid && known && fits;
        // The locks to test: all of them when a force changed; otherwise those whose limit
        // reads a stepped input (the others held at the last step's end with these torques
        // and limits).
        let mut test = u64::MAX;
        if exact && len == 0 {
            test = self.inputs.steps.iter().fold(0, |m, &(k, _, _)| m | self.model.readers[k as usize]);
            if test & s.locked.iter().fold(0u64, |m, &i| m | 1 << i) == 0 {
                return false;
            }
        }
        if exact {
            let Work { lam_start, lam_end, .. } = &mut self.ws;
            lam_start[..r].copy_from_slice(&lam_end[..r]);
            map_columns_onto(&s.tmap, rs, &df[..len], 0, &mut lam_start[..r]);
        } else {
            self.sc.phi_e.copy_from_slice(&self.phi);
            self.sc.w_e.copy_from_slice(&self.w);
            self.constraint_torques_at_e(self.t);
            let Work { lam_start, lam, .. } = &mut self.ws;
            lam_start[..r].copy_from_slice(&lam[..r]);
        }
        // (`input_change_keeps_modes` left every element's capacity with the new inputs in
        // `ws.caps`.)
        let s = &self.slots[self.cur];
        let (lam, caps) = (&self.ws.lam_start, &self.ws.caps);
        if s.redundant {
            if self.min_norm_inside(lam, |i| caps[i]) {
                return false;
            }
            // The capacity-weighted split is the second certificate (as at the samples); the
            // complementarity solve of the mode selection decides the rest.
            if exact {
                let Work { f, f_end, .. } = &mut self.ws;
                let Scratch { w_e, .. } = &mut *self.sc;
                f.copy_from_slice(f_end);
                for &(node, v) in &df[..len] {
                    f[node as usize] += v;
                }
                w_e.copy_from_slice(&self.w);
            }
            let Work { sig, caps, .. } = &mut self.ws;
            Self::stuck_capacities(&self.model.net, &self.modes, &sig[2], caps);
            return !self.weighted_split_inside(At::Dense);
        }
        let np = self.model.net.rows.len();
        s.locked.iter().enumerate().any(|(pos, &i)| {
            test & 1 << i != 0 && self.model.net.friction[i].law.hold_excess(caps[i], lam[np + pos], lam).0 > 0.0
        })
    }

    /// Kinematic clutches (Tiller's functional clutch): a rising command starts engagement (the relative speed is
    /// prescribed to fall linearly to zero over the shift time, then held), a falling one starts
    /// the release (the last torque ramps down to zero over the shift time). Both ramps are
    /// signals rewritten here, so their ends are ordinary time events.
    pub(super) fn switch_kinematic_clutches(&mut self, initial: bool) {
        let t = self.t;
        let mut changed = false;
        for j in 0..self.model.net.kinematic.len() {
            let kc = self.model.net.kinematic[j].clone();
            let cmd = self.ws.sig[2][kc.command] > 0.5;
            if cmd && !self.kin_engaged[j] {
                let w0 = kc.row.dot(&self.w);
                let ramp = Signal::Ramp { height: -w0, duration: kc.shift_time, offset: w0, start_time: t };
                self.model.signals[kc.rho_signal] = ramp;
                self.model.signals[kc.tau_signal] = Signal::Constant(0.0);
                self.kin_engaged[j] = true;
                changed = true;
            } else if !cmd && self.kin_engaged[j] {
                // The torque it carried just before: its constraint torque now.
                self.sc.phi_e.copy_from_slice(&self.phi);
                self.sc.w_e.copy_from_slice(&self.w);
                self.constraint_torques_at_e(t);
                let s = &self.slots[self.cur];
                let pos = s.kin.iter().position(|&k| k == j).map(|p| self.model.net.rows.len() + s.locked.len() + p);
                let tau_hold = pos.map_or(0.0, |p| -self.ws.lam[p]);
                let ramp = Signal::Ramp { height: -tau_hold, duration: kc.shift_time, offset: tau_hold, start_time: t };
                self.model.signals[kc.tau_signal] = ramp;
                self.model.signals[kc.rho_signal] = Signal::Constant(0.0);
                self.kin_engaged[j] = false;
                changed = true;
            }
        }
        if changed {
            self.mirror_inputs();
            self.signals_changed(true);
        }
        if changed {
            self.fill_signals(2, t, false);
            self.next_time_event = self.compute_next_time_event(t);
        }
        // Reported modes: engaging slides in the direction of the remaining slip.
        for j in 0..self.model.net.kinematic.len() {
            let kc = &self.model.net.kinematic[j];
            let mode = if !self.kin_engaged[j] {
                FrictionMode::Free
            } else {
                let rho = self.ws.sig[2][kc.rho_signal];
                if rho > 0.0 {
                    FrictionMode::Forward
                } else if rho < 0.0 {
                    FrictionMode::Backward
                } else {
                    FrictionMode::Stuck
                }
            };
            if mode != self.kin_modes[j] {
                if !initial && self.events.has_room() {
                    let from = self.kin_modes[j];
                    self.events.push(ModeEvent { time: t, element: kc.element, from, to: mode });
                }
                self.kin_modes[j] = mode;
            }
        }
    }

    /// Mass-weighted projection of the speeds onto the current mode's constraints (momentum
    /// conserving; the kinetic energy it removes is booked by `select_modes`).
    pub(super) fn project(&mut self) {
        let n = self.model.n_dof;
        self.prescribed(self.t, 3);
        let s = &self.slots[self.cur];
        let m = s.m;
        let rhs = !s.rhs.is_empty();
        let wp = &self.ws.presc_speed[3];
        let q = &mut self.sc.scratch_n;
        for a in 0..m {
            q[a] = (0..n)
                .map(|k| {
                    s.basis.nmat[k * n + a] * self.model.net.mass[k] * if rhs { self.w[k] - wp[k] } else { self.w[k] }
                })
                .sum();
        }
        if m > 0 {
            linalg::lu_solve(&s.mr_lu, m, &s.mr_piv, &mut q[..m]);
        }
        for k in 0..n {
            self.w[k] = (0..m).map(|j| s.basis.nmat[k * n + j] * q[j]).sum::<f64>() + if rhs { wp[k] } else { 0.0 };
        }
    }

    /// Solves the boxed complementarity problem of the `k` candidates in `ws.qp.idx` under the
    /// base slot (LossyGear bounds iterated with the transmitted torque). Returns the Tikhonov
    /// regularisation used, so callers can recover the unregularised accelerations.
    pub(super) fn qp_solve(&mut self, base: usize, k: usize) -> f64 {
        let n = self.model.n_dof;
        let nf = self.model.net.friction.len();
        let dependent_candidates = (0..k).any(|a| self.model.torque_dependent & 1 << self.sc.qp.idx[a] != 0);
        // LossyGear bounds depend on the transmitted torque, which depends on the solution:
        // first solve with them open, then iterate bounds <- torque to a fixed point.
        let passes = if dependent_candidates { 10 } else { 1 };
        // The matrix W (with its Tikhonov term) is rebuilt, and its free-block factors dropped,
        // only when the base mode or the candidate set change.
        let mask = (0..k).fold(0u64, |m, a| m | 1 << self.sc.qp.idx[a]);
        let id = (self.slots[base].key, self.slots[base].generation, mask);
        if self.sc.qp.matrix != id {
            self.sc.qp.matrix = id;
            self.sc.qp.factored = u64::MAX;
            let mut dmax: f64 = 0.0;
            for a in 0..k {
                let ia = self.sc.qp.idx[a];
                for b in 0..k {
                    let ib = self.sc.qp.idx[b];
                    self.sc.qp.w[a * k + b] = self.qp.qp_w[ia * nf + ib];
                }
                dmax = dmax.max(self.qp.qp_w[ia * nf + ia]);
            }
            self.sc.qp.eps = 1e-12 * dmax.max(1e-300);
            for a in 0..k {
                self.sc.qp.w[a * k + a] += self.sc.qp.eps;
            }
        }
        let eps = self.sc.qp.eps;
        for pass in 0..passes {
            for a in 0..k {
                let ia = self.sc.qp.idx[a];
                self.sc.qp.rhs[a] = self.sc.qp.b[ia];
                let (lo, hi) = match &self.model.net.friction[ia].law {
                    crate::elements::FrictionLaw::Lossy { table, .. } => {
                        if pass == 0 {
                            (f64::NEG_INFINITY, f64::INFINITY)
                        } else {
                            // lambda = -tauLoss.
                            let (l, h) = table.at(0.0).standstill_bounds(self.ws.dependent_input[ia]);
                            (-h, -l)
                        }
                    }
                    law @ crate::elements::FrictionLaw::Ramp { .. } => {
                        // The input torque of the last pass (or of the last solve).
                        let tm = law.ramp_limit(self.ws.dependent_input[ia]).unwrap_or(0.0);
                        (-tm, tm)
                    }
                    _ => {
                        let tm = self.ws.caps[ia].tau_max;
                        (-tm, if self.ws.caps[ia].one_way { f64::INFINITY } else { tm })
                    }
                };
                self.sc.qp.lo[a] = lo;
                self.sc.qp.hi[a] = hi;
            }
            // Warm start from the last solution when every candidate has one (the active set
            // rarely changes from one solve to the next); the optimum is unique either way.
            let warm = (0..k).all(|a| self.ws.qp.warm_ok[self.sc.qp.idx[a]]);
            if warm {
                for a in 0..k {
                    let ia = self.sc.qp.idx[a];
                    self.sc.qp.x[a] = self.ws.qp.warm_x[ia];
                    self.sc.qp.state[a] = self.ws.qp.warm_state[ia];
                }
            }
            box_qp(
                k,
                &self.sc.qp.w,
                &self.sc.qp.rhs,
                &self.sc.qp.lo,
                &self.sc.qp.hi,
                &mut self.sc.qp.x,
                &mut self.sc.qp.state,
                &mut self.sc.qp.fact,
                &mut self.sc.qp.piv,
                &mut self.sc.qp.factored,
                &mut self.ws.lam,
                warm,
            );
            for a in 0..k {
                let ia = self.sc.qp.idx[a];
                self.ws.qp.warm_x[ia] = self.sc.qp.x[a];
                self.ws.qp.warm_state[ia] = self.sc.qp.state[a];
                self.ws.qp.warm_ok[ia] = true;
            }
            if !dependent_candidates {
                break;
            }
            // Transmitted torques tau_a = -lambda_L - lambda_G under the base constraints
            // with the candidate torques applied.
            let Work { presc_acc: ud, qp: QpWork { extra: qp_extra, .. }, f, lam, dependent_input, .. } = &mut self.ws;
            let Scratch { qp: QpScratch { x: qp_x, idx: qp_idx, .. }, dep_scratch: ls_a, acc, xnz, .. } = &mut *self.sc;
            for kk in 0..n {
                ls_a[kk] = f[kk] + qp_extra[kk];
            }
            for a in 0..k {
                self.model.net.friction[qp_idx[a]].row.add_scaled(ls_a, qp_x[a]);
            }
            Self::constraint_torques(&self.model.net, &self.slots[base].mode, ls_a, &ud[3], acc, xnz, lam, n);
            let mut change: f64 = 0.0;
            let mut scale: f64 = 1e-300;
            for a in 0..k {
                let ia = qp_idx[a];
                let law = &self.model.net.friction[ia].law;
                let ta = match law {
                    crate::elements::FrictionLaw::Lossy { gear_row, .. } => -qp_x[a] - lam[*gear_row],
                    crate::elements::FrictionLaw::Ramp { .. } => law.ramp_input(lam),
                    _ => continue,
                };
                change = change.max((ta - dependent_input[ia]).abs());
                scale = scale.max(ta.abs());
                dependent_input[ia] = ta;
            }
            if pass > 0 && change <= 1e-12 * scale {
                break;
            }
        }
        eps
    }

    /// `b_i = B_i f` for all friction rows (the stuck ones when `stuck_only`) from `ws.f` (the
    /// relative accelerations without the candidates' torques), plus the prescribed part
    /// `R u - B M u`, `u = P rho'` (`ws.presc_acc[3]`).
    pub(super) fn qp_rhs(&mut self, prescribed: bool, stuck_only: bool) {
        let n = self.model.n_dof;
        let nf = self.model.net.friction.len();
        for i in 0..nf {
            if stuck_only && self.modes[i] != FrictionMode::Stuck {
                continue;
            }
            let mut b: f64 = (0..n).map(|k| self.qp.qp_b[i * n + k] * self.ws.f[k]).sum();
            if prescribed {
                let u = &self.ws.presc_acc[3];
                b += self.model.net.friction[i].row.dot(u)
                    - (0..n).map(|k| self.qp.qp_b[i * n + k] * self.model.net.mass[k] * u[k]).sum::<f64>();
            }
            self.sc.qp.b[i] = b;
        }
    }

    /// Static capacities of the stuck friction elements (the only ones a group test reads).
    pub(super) fn stuck_capacities(net: &Network, modes: &[FrictionMode], sig: &[f64], caps: &mut [Capacity]) {
        for (k, fe) in net.friction.iter().enumerate() {
            if modes[k] == FrictionMode::Stuck {
                caps[k] = fe.law.capacity(sig);
            }
        }
    }

    /// The capacity-weighted split (`ModeSlot::tmap_w`) of the stuck torques at a sample, from
    /// the forces there (`f_st`, `f_end`, or `f` for the dense sample, which
    /// [`Simulation::constraint_torques_at_e`] fills) and `ws.caps`: true when it is strictly
    /// inside every static limit, with a margin above its regularisation error (at most 1e-6
    /// relative). A certificate that the stuck set holds when the minimum-norm split of a
    /// redundant group overloads one element.
    pub(super) fn weighted_split_inside(&mut self, at: At) -> bool {
        let n = self.model.n_dof;
        let Work { presc_acc: ud, f_end, f, caps, .. } = &mut self.ws;
        let Scratch { f_st, acc, scratch_r: lam, xnz, .. } = &mut *self.sc;
        let (f, ud) = match at {
            At::Stage(i) => (&f_st[i], &ud[i]),
            At::End => (&*f_end, &ud[2]),
            At::Dense => (&*f, &ud[3]),
        };
        let s = &self.slots[self.cur];
        let np = self.model.net.rows.len();
        let x = if s.rhs.is_empty() {
            &f[..n]
        } else {
            for k in 0..n {
                acc[k] = f[k] - self.model.net.mass[k] * ud[k];
            }
            &acc[..n]
        };
        map_columns(&s.tmap_w, s.rstride, nonzeros(x, xnz), &mut lam[..s.r]);
        let mut inside = true;
        for (pos, &i) in s.locked.iter().enumerate() {
            let law = &self.model.net.friction[i].law;
            if matches!(law, crate::elements::FrictionLaw::Lossy { .. }) {
                inside = false;
                break;
            }
            let (g, limit) = law.hold_excess(caps[i], lam[np + pos], lam);
            if g >= -1e-5 * limit.max(1e-300) {
                inside = false;
                break;
            }
        }
        inside
    }

    /// Break-away test of a redundant lock set (two locks on one relative motion) at a sample:
    /// the complementarity problem of the stuck elements is solved with the forces there; the
    /// result is the largest relative acceleration it cannot cancel, minus twice the
    /// classification tolerance (so a located event always releases something).
    pub(super) fn group_violation(&mut self, at: At, t: f64) -> f64 {
        let nf = self.model.net.friction.len();
        // Steady signals give every sample of the epoch the same capacities.
        let caps_valid =
            self.signals.unsteady.is_empty() && self.capacities.stuck_key == (self.signals.generation, self.epoch);
        match at {
            At::Stage(i) => {
                self.stage_forces();
                self.stage_torques();
                let Work { f, sig, caps, .. } = &mut self.ws;
                let Scratch { f_st, .. } = &mut *self.sc;
                f.copy_from_slice(&f_st[i]);
                if !caps_valid {
                    Self::stuck_capacities(&self.model.net, &self.modes, &sig[i], caps);
                }
            }
            At::End => {
                self.end_torques();
                let Work { f, f_end, sig_end, caps, .. } = &mut self.ws;
                f.copy_from_slice(f_end);
                if !caps_valid {
                    Self::stuck_capacities(&self.model.net, &self.modes, sig_end, caps);
                }
            }
            At::Dense => {
                self.fill_signals(2, t, false);
                // Forces (into `f`) and the current mode's constraint torques (into `lam`).
                self.constraint_torques_at_e(t);
                let Work { sig, caps, .. } = &mut self.ws;
                if !caps_valid {
                    Self::stuck_capacities(&self.model.net, &self.modes, &sig[2], caps);
                }
            }
        }
        self.capacities.stuck_key =
            if self.signals.unsteady.is_empty() { (self.signals.generation, self.epoch) } else { (u64::MAX, 0) };
        // The current mode's minimum-norm split is one split: when it is strictly inside every
        // limit, the group holds and the complementarity solve below would say so too.
        {
            let lam = match at {
                At::Stage(i) => &self.sc.lam_st[i],
                At::End => &self.ws.lam_end,
                At::Dense => &self.ws.lam,
            };
            if self.min_norm_inside(lam, |i| self.ws.caps[i]) {
                return -1.0;
            }
        }
        // The capacity-weighted split is a second certificate.
        if self.weighted_split_inside(at) {
            return -1.0;
        }
        let base_key = Self::lock_key(&[], &self.kin_engaged) << nf;
        let base = self.slot_for(base_key);
        self.compute_qp(base);
        self.prescribed_in(base, t, 3);
        self.qp_rhs(!self.slots[base].rhs.is_empty(), true);
        let mut k = 0;
        for i in 0..nf {
            if self.modes[i] == FrictionMode::Stuck {
                self.sc.qp.idx[k] = i;
                k += 1;
            }
        }
        if k == 0 {
            return -1.0;
        }
        let eps = self.qp_solve(base, k);
        let mut worst: f64 = 0.0;
        let mut bscale: f64 = 1e-300;
        let mut xmax: f64 = 0.0;
        for a in 0..k {
            let acc: f64 = (0..k)
                .map(|b| (self.sc.qp.w[a * k + b] - if a == b { eps } else { 0.0 }) * self.sc.qp.x[b])
                .sum::<f64>()
                + self.sc.qp.rhs[a];
            worst = worst.max(acc.abs());
            bscale = bscale.max(self.sc.qp.rhs[a].abs());
            xmax = xmax.max(self.sc.qp.x[a].abs());
        }
        // The minimum-norm split leaves each relative acceleration `eps x` short of zero (the
        // Tikhonov term); that is not a violation.
        worst - 2.0 * (1e-9 * bscale + 1e-12 + eps * xmax)
    }

    /// The coupled stick-slip problem for the candidates (see the module docs).
    pub(super) fn resolve_candidates(&mut self, base: usize) {
        let prescribed = !self.slots[base].rhs.is_empty();
        let nf = self.model.net.friction.len();
        self.ws.qp.extra.fill(0.0);
        self.qp_rhs(prescribed, false);
        // The heaviest body: a lock row's Delassus entry is at least |row|^2 / jmax unless the
        // kinematics alone fix the row's speed.
        let jmax = self.model.net.mass.iter().fold(1e-300f64, |m, &j| m.max(j));
        for _round in 0..=nf {
            // Gather the candidate subproblem.
            let mut k = 0;
            for i in 0..nf {
                if self.sc.qp.candidate[i] {
                    self.sc.qp.idx[k] = i;
                    k += 1;
                }
            }
            if k == 0 {
                return;
            }
            let eps = self.qp_solve(base, k);
            // Relative accelerations and break-away.
            let bscale = (0..k).fold(1e-300f64, |s, a| s.max(self.sc.qp.rhs[a].abs()));
            let tol_a = 1e-9 * bscale + 1e-12;
            let mut released = false;
            for a in 0..k {
                let i = self.sc.qp.idx[a];
                let x = self.sc.qp.x[a];
                // A break-away located by the event search: the excess over the static limit is
                // of rounding size here, so the element goes when its torque is at the limit to
                // within 1e-6, whatever side of it rounding put the complementarity solution
                // (the state here is the re-integrated one, not the dense output the search
                // sampled: they differ by about 1e-7 of the limit).
                let at_located_breakaway = self.friction.breaking & (1 << i) != 0
                    && (self.sc.qp.state[a] != 0 || x.abs() >= (1.0 - 1e-6) * self.ws.caps[i].tau_max);
                // A slip the kinematics prescribe (a friction element on a Position or Speed
                // source's flange, MSL's TestFrictionPosition): no torque changes its
                // acceleration, so the lock holds only while the prescribed acceleration is zero,
                // and the element otherwise slides the way that acceleration turns its slip. (The
                // complementarity solve cannot tell: its torque has no effect, any value solves it.)
                let row = &self.model.net.friction[i].row;
                let prescribed_slip = self.sc.qp.w[a * k + a] <= 1e-12 * row.norm2() / jmax;
                if prescribed_slip && self.sc.qp.rhs[a].abs() <= tol_a {
                    continue;
                }
                if self.sc.qp.state[a] == 0 && !at_located_breakaway && !prescribed_slip {
                    continue;
                }
                let acc: f64 = (0..k)
                    .map(|b| (self.sc.qp.w[a * k + b] - if a == b { eps } else { 0.0 }) * self.sc.qp.x[b])
                    .sum::<f64>()
                    + self.sc.qp.rhs[a];
                if acc.abs() > tol_a || at_located_breakaway {
                    // At the bound the acceleration points against the torque's sign.
                    let dir = if acc.abs() > tol_a {
                        acc.signum()
                    } else if self.sc.qp.state[a] != 0 {
                        -(self.sc.qp.state[a] as f64)
                    } else {
                        -x.signum()
                    };
                    self.sc.qp.candidate[i] = false;
                    self.sc.qp.new_modes[i] = if dir > 0.0 { FrictionMode::Forward } else { FrictionMode::Backward };
                    // Kinetic torque at zero slip acts from now on: lambda = -dir tau0.
                    // A lossy gear starts rolling with the loss at its standstill bound.
                    let lam = match &self.model.net.friction[i].law {
                        crate::elements::FrictionLaw::Lossy { .. } | crate::elements::FrictionLaw::Ramp { .. } => x,
                        _ => -dir * self.ws.caps[i].tau0,
                    };
                    for j in 0..nf {
                        self.sc.qp.b[j] += self.qp.qp_w[j * nf + i] * lam;
                    }
                    self.model.net.friction[i].row.add_scaled(&mut self.ws.qp.extra, lam);
                    released = true;
                }
            }
            if !released {
                return;
            }
        }
    }
}

/// The friction elements by what they do now, as bit masks over the friction elements (bit i:
/// element i).
#[derive(Debug, Clone)]
pub(super) struct FrictionSets {
    /// Elements whose located break-away event is being resolved: at their static bound they
    /// break away even if the excess is still within rounding.
    pub(super) breaking: u64,
    /// Elements whose last selected sliding direction reversed at once (the next event came
    /// with no time passing, twice): the next selection slides them the other way (`flip`) or,
    /// when that reversed at once too, holds them (`hold`). Set by the step loop, used up by
    /// [`Simulation::select_modes`].
    pub(super) flip: u64,
    /// See `flip`.
    pub(super) hold: u64,
    /// A redundant lock group whose break-away test fired at the very instant of its
    /// selection again and again (the complementarity solve found a split within the limits
    /// that the minimum-norm test does not): trusted, untested, for the rest of the step.
    pub(super) trust_group: bool,
    /// Locked elements whose break-away test fired at the very instant of their selection again
    /// and again while the complementarity solve kept them stuck (its torque well inside the
    /// limit, the mode's own constraint torque at it: the two disagree where a limited-slip
    /// pack's torque reads constraint torques), as a mask: trusted, untested, for the rest of
    /// the step.
    pub(super) trust_locks: u64,
    /// Bit `i` set when friction element `i` slides (Forward or Backward): the elements whose
    /// kinetic torque a force evaluation adds.
    pub(super) sliding: u64,
    /// The friction elements whose normal force (or load) is an unsteady signal, as a mask:
    /// only these can engage or release inside a sub-step (a steady force that changes is an
    /// input change, tested at the step start).
    pub(super) force_watch: u64,
    /// The elements of `force_watch` with the signal each one's normal force reads, `(element,
    /// signal)` in element order, but for signals held between time events (steps and pulses,
    /// which cannot turn an element on or off inside a sub-step): the time-only kernel's
    /// engage and release test reads them without going through the law.
    pub(super) watch_list: CapVec<(u32, u32)>,
    /// The free friction elements, as a mask (with `sliding`, kept by the mode selection).
    pub(super) free: u64,
    /// The free elements whose output torque the last output update zeroed.
    pub(super) out_free: u64,
    /// [`Simulation::slips_at_zero`] of the present state and modes, when known (computed at
    /// the end of an event-free sub-step; a mode selection forgets it).
    pub(super) zero_slips: Option<u64>,
}

/// What the capacities cached in the workspace are valid for.
#[derive(Debug, Clone)]
pub(super) struct CapacityCache {
    /// `(sig_gen, epoch)` at which `ws.caps` last held the stuck elements' capacities under
    /// steady signals (group tests reuse them at every sample of the epoch).
    pub(super) stuck_key: (u64, u64),
    /// `sig_gen` at which `ws.caps` last held every friction element's capacity (a mode
    /// selection or a completed input-change test); with steady signals break-away samples
    /// read them instead of evaluating the law again.
    pub(super) all_generation: u64,
    /// The friction elements whose capacity inputs set by id changed since `caps_all_gen`,
    /// as a mask (`None` when something else changed too): an input-change test re-evaluates
    /// only these.
    pub(super) stale: Option<u64>,
}

impl FrictionSets {
    /// Every one of `nf` friction elements in no set (the first mode selection sorts them).
    pub(super) fn new(nf: usize) -> Self {
        FrictionSets {
            breaking: 0,
            flip: 0,
            hold: 0,
            trust_group: false,
            trust_locks: 0,
            sliding: 0,
            zero_slips: None,
            free: 0,
            out_free: 0,
            force_watch: 0,
            watch_list: CapVec::new(nf),
        }
    }
}

impl CapacityCache {
    /// Nothing cached.
    pub(super) fn new() -> Self {
        CapacityCache { stuck_key: (u64::MAX, 0), all_generation: u64::MAX, stale: None }
    }
}
