//! The per-simulation workspaces: buffers a step writes and reads back within itself.

use super::*;

impl Work {
    /// Cuts (or grows) the sub-step's own Newton buffers to modes of `m` free coordinates.
    pub(super) fn size_newton(&mut self, m: usize) {
        if self.newton_inv.len() != 4 * m * m {
            self.newton_inv = vec![0.0; 4 * m * m];
            self.newton_tmp = vec![0.0; 4 * m * m];
            self.newton_piv = vec![0; 2 * m];
        }
    }

    /// The signal buffers `sig[0]`, `sig[1]`, `sig[2]`, `sig_end`, by index 0 to 3.
    pub(super) fn signal_buffers(&mut self) -> [&mut Vec<f64>; 4] {
        let [s0, s1, s2] = &mut self.sig;
        [s0, s1, s2, &mut self.sig_end]
    }

    /// Signal buffer `b` (see [`Work::signal_buffers`]).
    pub(super) fn signal_buffer(&mut self, b: usize) -> &mut Vec<f64> {
        if b == 3 { &mut self.sig_end } else { &mut self.sig[b] }
    }
}

/// Preallocated scratch buffers.
#[derive(Debug, Clone)]
pub(super) struct Work {
    // Signals.
    /// Signal values at the two stages and the end of the sub-step being integrated (see
    /// [`Work::signal_buffers`]).
    pub(super) sig: [Vec<f64>; 3],
    /// Left-limit signal values at the end of the integrated sub-step.
    pub(super) sig_end: Vec<f64>,
    /// Prescribed-motion parts of the speeds (`P rho`) and accelerations (`P rho'`) at the two
    /// stages and the end of the sub-step, and at a dense/now point (index 3).
    pub(super) presc_speed: [Vec<f64>; 4],
    pub(super) presc_acc: [Vec<f64>; 4],

    // The Gauss stage solve (`n` free coordinates at the most, `m` in the current mode).
    /// Node angles and speeds at the two stages.
    pub(super) phi_st: [Vec<f64>; 2],
    pub(super) w_st: [Vec<f64>; 2],
    /// Reduced speeds at the sub-step start (`m`), the stage unknowns `Q1 Q2` (`2m`), and the
    /// Newton residual or correction (`2m`).
    pub(super) q0: Vec<f64>,
    pub(super) q: Vec<f64>,
    pub(super) res: Vec<f64>,
    /// The stages before the last correction on a fresh Jacobian (`2m`): where Newton goes
    /// back to when that correction diverged.
    pub(super) q_last: Vec<f64>,
    /// A damped Newton iteration's full correction (`2m`).
    pub(super) q_dir: Vec<f64>,
    /// Reduced stage forces `N^T f` at the two stages (`2m`).
    pub(super) stage_g: Vec<f64>,
    /// Node angles and speeds at the sub-step end, and at an event or dense point.
    pub(super) phi1: Vec<f64>,
    pub(super) w1: Vec<f64>,
    pub(super) phi_e: Vec<f64>,
    pub(super) w_e: Vec<f64>,
    /// The state at the step start, restored when the step produces a non-finite value.
    pub(super) phi_save: Vec<f64>,
    pub(super) w_save: Vec<f64>,
    /// Jacobians of the node forces by the angles and by the speeds (`n x n`).
    pub(super) jac_phi: Vec<f64>,
    pub(super) jac_w: Vec<f64>,
    /// A sub-step's own inverse Newton matrix (an event-cut size), as in [`ModeSlot`].
    pub(super) newton_inv: Vec<f64>,
    pub(super) newton_piv: Vec<usize>,
    /// The inverse of a Newton matrix being formed, then a column of the identity
    /// (`4 n^2 + 2 n`).
    pub(super) newton_tmp: Vec<f64>,

    // Forces and constraint torques.
    /// Node forces of the evaluation at hand.
    pub(super) f: Vec<f64>,
    /// Node accelerations, or a force-sized scratch vector.
    pub(super) acc: Vec<f64>,
    /// The non-zero entries of a force vector, `(node, value)` ascending (`n` slots).
    pub(super) xnz: Vec<(u32, f64)>,
    /// Constraint torques (`r`), a row-sized scratch vector, and the constraint torques at a
    /// step start right after an input change.
    pub(super) lam: Vec<f64>,
    pub(super) scratch_r: Vec<f64>,
    pub(super) lam_start: Vec<f64>,
    /// A coordinate-sized scratch vector.
    pub(super) scratch_n: Vec<f64>,
    /// Scratch of the torque-dependent correction (LossyGear, limited slip), the friction torque
    /// it solved per element, and the estimates of the torque each limit depends on (a lossy
    /// gear's transmitted torque, a limited-slip pack's input torque), per friction element.
    pub(super) dep_scratch: Vec<f64>,
    pub(super) dep_tau: Vec<f64>,
    pub(super) dependent_input: Vec<f64>,
    /// Each friction element's capacity (static and kinetic limits) under the signals at hand.
    pub(super) caps: Vec<Capacity>,
    /// Located slip-reversal and break-away thetas of the sub-step being searched (valid where
    /// its masks say).
    pub(super) slip_theta: Vec<f64>,

    // The integrated sub-step's force caches (valid while `cached` says so).
    /// Which of the per-sub-step caches are filled.
    pub(super) cached: Cached,
    /// The last sub-step's Newton iteration stopped at its iteration limit without converging
    /// (the sub-step is then cut, not committed).
    pub(super) newton_failed: bool,
    /// This step met a singular matrix: the mode slot and the reduced coordinate whose pivot
    /// vanished (the Newton matrix or the reduced inertia), to name its bodies if the step
    /// ends non-finite.
    pub(super) singular: Option<(usize, usize)>,
    /// Forces at the converged stages and at the sub-step end.
    pub(super) f_st: [Vec<f64>; 2],
    pub(super) f_end: Vec<f64>,
    /// Constraint torques at the stages and the end.
    pub(super) lam_st: [Vec<f64>; 2],
    pub(super) lam_end: Vec<f64>,
    /// Per law at the stages: power and dissipation, W; per friction element: power, W.
    pub(super) law_power: [Vec<f64>; 2],
    pub(super) law_diss: [Vec<f64>; 2],
    pub(super) fric_power: [Vec<f64>; 2],
    /// Sliding friction torques at the stages of the last force evaluation (the stage
    /// predictor scales them when their signal steps).
    pub(super) fric_tau: [Vec<f64>; 2],
    /// Friction powers and torque-dependent friction torques at the sub-step end (from
    /// [`Simulation::end_torques`]; `dep_tau` is scratch that stage evaluations overwrite).
    pub(super) fric_power_end: Vec<f64>,
    pub(super) dep_tau_end: Vec<f64>,
    /// Law torques and dissipations and sliding friction torques at the sub-step end (from
    /// [`Simulation::end_torques`]): the telemetry of a clean step end, not evaluated twice.
    pub(super) law_tau_end: Vec<f64>,
    pub(super) law_diss_end: Vec<f64>,
    pub(super) fric_tau_end: Vec<f64>,

    /// The mode selection's complementarity problem and its warm start.
    pub(super) qp: QpWork,
}

impl Work {
    /// Workspaces sized for `net`: every buffer a step uses is allocated here, once.
    pub(super) fn new(net: &Network) -> Self {
        let n = net.n_dof;
        let nn = net.nodes.len();
        let nf = net.friction.len();
        let nl = net.laws.len();
        let nk = net.kinematic.len();
        let rmax = net.rows.len() + nf + nk;
        let v = |k: usize| vec![0.0; k];
        Work {
            sig: [v(net.signals.len()), v(net.signals.len()), v(net.signals.len())],
            f: v(nn),
            scratch_n: v(n),
            xnz: vec![(0, 0.0); n],
            slip_theta: v(nf),
            phi_st: [v(nn), v(nn)],
            w_st: [v(nn), v(nn)],
            q0: v(n),
            q: v(2 * n),
            res: v(2 * n),
            q_last: v(2 * n),
            q_dir: v(2 * n),
            phi1: v(nn),
            w1: v(nn),
            phi_e: v(nn),
            w_e: v(nn),
            acc: v(nn),
            stage_g: v(2 * n),
            jac_phi: v(n * n),
            jac_w: v(n * n),
            scratch_r: v(rmax),
            lam_start: v(rmax),
            lam: v(rmax),
            caps: vec![Capacity { free: true, tau0: 0.0, tau_max: 0.0, one_way: false }; nf],
            sig_end: v(net.signals.len()),
            presc_speed: [v(nn), v(nn), v(nn), v(nn)],
            presc_acc: [v(nn), v(nn), v(nn), v(nn)],
            dep_scratch: v(nn),
            dep_tau: v(n.max(nf)),
            dependent_input: v(nf),
            f_st: [v(nn), v(nn)],
            f_end: v(nn),
            lam_st: [v(rmax), v(rmax)],
            lam_end: v(rmax),
            cached: Cached::NONE,
            newton_failed: false,
            singular: None,
            qp: QpWork::new(nf, nn),
            newton_inv: v(4 * n * n),
            newton_tmp: v(4 * n * n + 2 * n),
            newton_piv: vec![0; 2 * n],
            phi_save: v(nn),
            w_save: v(nn),
            law_power: [v(nl), v(nl)],
            law_diss: [v(nl), v(nl)],
            fric_power: [v(nf), v(nf)],
            fric_tau: [v(nf), v(nf)],
            fric_power_end: v(nf),
            dep_tau_end: v(nf),
            law_tau_end: v(nl),
            law_diss_end: v(nl),
            fric_tau_end: v(nf),
        }
    }
}

/// Which of a sub-step's force and torque caches hold the values of the integrated sub-step
/// (a set of the flags below).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cached(pub(super) u8);

impl Cached {
    /// Nothing cached.
    pub(super) const NONE: Cached = Cached(0);
    /// The forces at the two stages (`f_st`, with their powers and sliding torques).
    pub(super) const STAGE_FORCES: Cached = Cached(1);
    /// The constraint torques at the two stages (`lam_st`).
    pub(super) const STAGE_TORQUES: Cached = Cached(2);
    /// The forces and constraint torques at the sub-step's end (`f_end`, `lam_end`).
    pub(super) const END: Cached = Cached(4);

    /// Every cache of `c` is filled.
    #[inline]
    pub(super) fn has(self, c: Cached) -> bool {
        self.0 & c.0 != 0
    }

    /// Marks the caches of `c` filled.
    #[inline]
    pub(super) fn insert(&mut self, c: Cached) {
        self.0 |= c.0;
    }

    /// Marks the caches of `c` stale.
    #[inline]
    pub(super) fn remove(&mut self, c: Cached) {
        self.0 &= !c.0;
    }
}

/// A set of the four signal buffers, by their index in [`Work::signal_buffers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BufferSet(u8);

impl BufferSet {
    /// No buffer.
    pub(super) const NONE: BufferSet = BufferSet(0);
    /// The buffers a sub-step's stage fill writes: the two stages and the end (`sig[0]`,
    /// `sig[1]`, `sig_end`).
    pub(super) const STAGE_FILL: BufferSet = BufferSet(0b1011);

    /// Takes buffer `b` out of the set.
    #[inline]
    pub(super) fn remove(&mut self, b: usize) {
        self.0 &= !(1 << b);
    }
}

/// The box QP of a mode selection (`k` candidates of `nf` friction elements), its warm start
/// and the reuse of its factors.
#[derive(Debug, Clone)]
pub(super) struct QpWork {
    pub(super) w: Vec<f64>,
    pub(super) b: Vec<f64>,
    pub(super) x: Vec<f64>,
    pub(super) lo: Vec<f64>,
    pub(super) hi: Vec<f64>,
    pub(super) state: Vec<i8>,
    /// Last complementarity solution per friction element (warm start of the next solve).
    pub(super) warm_x: Vec<f64>,
    pub(super) warm_state: Vec<i8>,
    pub(super) warm_ok: Vec<bool>,
    pub(super) idx: Vec<usize>,
    pub(super) fact: Vec<f64>,
    pub(super) rhs: Vec<f64>,
    pub(super) piv: Vec<usize>,
    /// What `qp_fact`/`qp_piv` hold: the LU factors of the free block (mask over positions in
    /// `qp_idx`, `u64::MAX` when none) of the matrix identified by `qp_matrix`
    /// (base slot key, its generation, candidate mask). A solve on the same matrix and free set
    /// reuses them: bitwise the factors a fresh factorisation would give.
    pub(super) factored: u64,
    pub(super) matrix: (u64, u64, u64),
    /// The Tikhonov term on the diagonal of `qp_w`.
    pub(super) eps: f64,
    pub(super) new_modes: Vec<FrictionMode>,
    pub(super) candidate: Vec<bool>,
    /// Generalised forces of the elements released during one mode selection.
    pub(super) extra: Vec<f64>,
}

impl QpWork {
    /// Buffers for `nf` friction elements in a network of `nn` nodes.
    fn new(nf: usize, nn: usize) -> Self {
        let v = |k: usize| vec![0.0; k];
        QpWork {
            w: v(nf * nf),
            b: v(nf),
            x: v(nf),
            lo: v(nf),
            hi: v(nf),
            state: vec![0; nf],
            warm_x: vec![0.0; nf],
            warm_state: vec![0; nf],
            warm_ok: vec![false; nf],
            idx: vec![0; nf],
            fact: v(nf * nf),
            rhs: v(nf),
            piv: vec![0; nf],
            factored: u64::MAX,
            matrix: (u64::MAX, 0, 0),
            eps: 0.0,
            extra: v(nn),
            new_modes: vec![FrictionMode::Free; nf],
            candidate: vec![false; nf],
        }
    }
}

/// The matrices of a mode compilation (`r` active rows of `rmax` at the most, `n` coordinates):
/// the constraint matrix and its products, the row-echelon form, the constraint-force map.
#[derive(Debug, Clone)]
pub(super) struct CompileWork {
    pub(super) ggt: Vec<f64>,
    pub(super) ggt_weighted: Vec<f64>,
    pub(super) piv_weighted: Vec<usize>,
    pub(super) g_rows: Vec<f64>,
    /// `G` transposed (`n x r`) during a mode compilation.
    pub(super) g_cols: Vec<f64>,
    /// The weighted constraint-torque map's right-hand sides (`r x n`) during a mode
    /// compilation.
    pub(super) weighted_rhs: Vec<f64>,
    /// `Mr^-1 N^T` (`m x n`, `m <= n`) during a mode compilation.
    pub(super) mr_inv_nt: Vec<f64>,
    /// Augmented matrix for the mode compilation `[G | I]`.
    pub(super) aug: Vec<f64>,
    /// The coordinates in the order the null space eliminates them (lightest first), and
    /// each coordinate's place in that order (`n` each).
    pub(super) order: Vec<usize>,
    pub(super) place: Vec<usize>,
    /// The compiled mode's constraint-force map `L` (`r x n`, `lambda = L (M a - f)`), stored
    /// by columns (`n x r`), from which the compilation derives the slot's `tmap`.
    pub(super) lmap: Vec<f64>,
    /// Pivots (`max(rmax, n) + 1`), an `n`-vector and an `rmax`-vector of scratch.
    pub(super) piv: Vec<usize>,
    pub(super) acc: Vec<f64>,
    pub(super) scratch_r: Vec<f64>,
}

impl CompileWork {
    /// Buffers for `n` coordinates and at most `rmax` active rows.
    pub(super) fn new(n: usize, rmax: usize) -> Self {
        let v = |k: usize| vec![0.0; k];
        CompileWork {
            g_rows: v(rmax * n),
            g_cols: v(rmax * n),
            ggt: v(rmax * rmax),
            ggt_weighted: v(rmax * rmax),
            piv_weighted: vec![0; rmax + 1],
            weighted_rhs: v(rmax * n),
            mr_inv_nt: v(n * n),
            order: vec![0; n],
            place: vec![0; n],
            aug: v(rmax * (n + rmax)),
            lmap: v(rmax * n),
            piv: vec![0; rmax.max(n) + 1],
            acc: v(n),
            scratch_r: v(rmax),
        }
    }
}
