//! The per-simulation workspaces: what a sub-step leaves for the next one to read ([`Work`],
//! the simulation's own), and the buffers a step writes before it reads them ([`Scratch`],
//! held by the thread that steps: a simulation borrows one for the length of a step, so that a
//! fleet keeps one set per thread instead of one per vehicle, and the set stays in the cache
//! from one vehicle's step to the next).

use super::*;
use std::cell::RefCell;

impl Scratch {
    /// Cuts (or grows) the sub-step's own Newton buffers to modes of `m` free coordinates.
    pub(super) fn size_newton(&mut self, m: usize) {
        if self.newton_inv.len() != 4 * m * m {
            self.newton_inv = vec![0.0; 4 * m * m];
            self.newton_tmp = vec![0.0; 4 * m * m];
            self.newton_piv = vec![0; 2 * m];
        }
    }
}

impl Work {
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

/// The buffers of a sub-step that the next one reads (what a snapshot saves of the workspaces),
/// and the complementarity warm start: the simulation's own.
#[derive(Debug, Clone)]
pub(super) struct Work {
    // Signals.
    /// Signal values at the two stages and the end of the sub-step being integrated (see
    /// [`Work::signal_buffers`]).
    pub(super) sig: [Vec<f64>; 3],
    /// Left-limit signal values at the end of the integrated sub-step.
    pub(super) sig_end: Vec<f64>,
    /// Prescribed-motion parts of the speeds (`P rho`) and accelerations (`P rho'`) at the two
    /// stages and the end of the sub-step, and at a dense/now point (index 3). Carried: a
    /// mode without prescribed motion leaves them as they are, and the next one reads them.
    pub(super) presc_speed: [Vec<f64>; 4],
    pub(super) presc_acc: [Vec<f64>; 4],
    /// Reduced speeds at the sub-step start (`m`) and the stage unknowns `Q1 Q2` (`2m`).
    pub(super) q0: Vec<f64>,
    pub(super) q: Vec<f64>,
    /// Reduced stage forces `N^T f` at the two stages (`2m`).
    pub(super) stage_g: Vec<f64>,

    // Forces and constraint torques.
    /// Node forces of the evaluation at hand.
    pub(super) f: Vec<f64>,
    /// Constraint torques (`r`), and the constraint torques at a step start right after an
    /// input change.
    pub(super) lam: Vec<f64>,
    pub(super) lam_start: Vec<f64>,
    /// The friction torque the torque-dependent correction solved per element, and the
    /// estimates of the torque each limit depends on (a lossy gear's transmitted torque, a
    /// limited-slip pack's input torque), per friction element.
    pub(super) dep_tau: Vec<f64>,
    pub(super) dependent_input: Vec<f64>,
    /// Each friction element's capacity (static and kinetic limits) under the signals at hand.
    pub(super) caps: Vec<Capacity>,

    // The integrated sub-step's force caches (valid while `cached` says so).
    /// Which of the per-sub-step caches are filled.
    pub(super) cached: Cached,
    pub(super) f_end: Vec<f64>,
    pub(super) lam_end: Vec<f64>,
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

    /// The complementarity problem's warm start.
    pub(super) qp: QpWork,
}

/// The buffers a step writes before it reads them (every workspace a snapshot does not save),
/// and the complementarity problem's matrix and factors, which a selection reuses only when
/// this simulation formed them (see [`ScratchLease`]). Sized for one network shape
/// ([`ScratchShape`]); a simulation holds an empty one between its steps.
#[derive(Debug)]
pub(super) struct Scratch {
    /// The network shape the buffers are sized for (`None`: the empty placeholder).
    shape: Option<ScratchShape>,
    /// The lease this scratch last served (see [`ScratchLease`]).
    lease: ScratchLease,

    // The Gauss stage solve (`n` free coordinates at the most, `m` in the current mode).
    /// Node angles and speeds at the two stages.
    pub(super) phi_st: [Vec<f64>; 2],
    pub(super) w_st: [Vec<f64>; 2],
    /// The Newton residual or correction (`2m`).
    pub(super) res: Vec<f64>,
    /// The stages before the last correction on a fresh Jacobian (`2m`): where Newton goes
    /// back to when that correction diverged.
    pub(super) q_last: Vec<f64>,
    /// A damped Newton iteration's full correction (`2m`).
    pub(super) q_dir: Vec<f64>,
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
    /// Node accelerations, or a force-sized scratch vector.
    pub(super) acc: Vec<f64>,
    /// The non-zero entries of a force vector, `(node, value)` ascending (`n` slots).
    pub(super) xnz: Vec<(u32, f64)>,
    /// A row-sized scratch vector.
    pub(super) scratch_r: Vec<f64>,
    /// A coordinate-sized scratch vector.
    pub(super) scratch_n: Vec<f64>,
    /// Scratch of the torque-dependent correction (LossyGear, limited slip).
    pub(super) dep_scratch: Vec<f64>,
    /// Located slip-reversal and break-away thetas of the sub-step being searched (valid where
    /// its masks say).
    pub(super) slip_theta: Vec<f64>,
    /// The last sub-step's Newton iteration stopped at its iteration limit without converging
    /// (the sub-step is then cut, not committed).
    pub(super) newton_failed: bool,
    /// This step met a singular matrix: the mode slot and the reduced coordinate whose pivot
    /// vanished (the Newton matrix or the reduced inertia), to name its bodies if the step
    /// ends non-finite.
    pub(super) singular: Option<(usize, usize)>,
    /// Forces at the converged stages and at the sub-step end.
    pub(super) f_st: [Vec<f64>; 2],
    /// Constraint torques at the stages and the end.
    pub(super) lam_st: [Vec<f64>; 2],
    /// Per law at the stages: power and dissipation, W; per friction element: power, W.
    pub(super) law_power: [Vec<f64>; 2],
    pub(super) law_diss: [Vec<f64>; 2],
    pub(super) fric_power: [Vec<f64>; 2],
    /// The mode selection's complementarity problem and the reuse of its factors.
    pub(super) qp: QpScratch,
    /// The ground entries (past the free nodes) of `phi_st`, `w_st`, `phi1` and `w1` are all
    /// `+0.0`, as [`Simulation::ground_scratch`] wrote them: a simulation whose ground angles
    /// are all `+0.0` (most) finds what it would write there already written.
    pub(super) ground_zero: bool,
}

impl Scratch {
    /// Overwrites every buffer with NaN, every index with `usize::MAX`, every flag with
    /// garbage (the `scratch-poison` feature).
    #[cfg(feature = "scratch-poison")]
    fn poison(&mut self) {
        let nan = |v: &mut Vec<f64>| v.fill(f64::NAN);
        for v in self.phi_st.iter_mut().chain(&mut self.w_st) {
            nan(v);
        }
        for v in self.f_st.iter_mut().chain(&mut self.lam_st).chain(&mut self.law_power).chain(&mut self.law_diss) {
            nan(v);
        }
        for v in self.fric_power.iter_mut() {
            nan(v);
        }
        for v in [
            &mut self.res,
            &mut self.q_last,
            &mut self.q_dir,
            &mut self.phi1,
            &mut self.w1,
            &mut self.phi_e,
            &mut self.w_e,
            &mut self.phi_save,
            &mut self.w_save,
            &mut self.jac_phi,
            &mut self.jac_w,
            &mut self.newton_inv,
            &mut self.newton_tmp,
            &mut self.acc,
            &mut self.scratch_r,
            &mut self.scratch_n,
            &mut self.dep_scratch,
            &mut self.slip_theta,
            &mut self.qp.w,
            &mut self.qp.b,
            &mut self.qp.x,
            &mut self.qp.lo,
            &mut self.qp.hi,
            &mut self.qp.fact,
            &mut self.qp.rhs,
        ] {
            nan(v);
        }
        self.newton_piv.fill(usize::MAX);
        self.qp.idx.fill(usize::MAX);
        self.qp.piv.fill(usize::MAX);
        self.qp.state.fill(7);
        self.qp.eps = f64::NAN;
        self.qp.candidate.fill(true);
        self.qp.new_modes.fill(FrictionMode::Stuck);
        self.xnz.fill((u32::MAX, f64::NAN));
        self.newton_failed = true;
        self.singular = Some((usize::MAX, usize::MAX));
        self.ground_zero = false;
    }
}

impl Clone for Scratch {
    /// The empty placeholder: a clone of a simulation borrows its own scratch when it steps.
    fn clone(&self) -> Self {
        Scratch::placeholder()
    }
}

/// The sizes a [`Scratch`] is allocated for: networks of one shape share a thread's scratch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ScratchShape {
    n: usize,
    nodes: usize,
    friction: usize,
    laws: usize,
    rows: usize,
    /// The free coordinates of the base mode (the Newton buffers' size).
    m: usize,
}

impl ScratchShape {
    /// The shape of `net`, whose base mode has `m` free coordinates.
    pub(super) fn of(net: &Network, m: usize) -> Self {
        ScratchShape {
            n: net.n_dof,
            nodes: net.nodes.len(),
            friction: net.friction.len(),
            laws: net.laws.len(),
            rows: net.rows.len() + net.friction.len() + net.kinematic.len(),
            m,
        }
    }
}

impl Work {
    /// The carried buffers sized for `net`.
    pub(super) fn new(net: &Network) -> Self {
        let nn = net.nodes.len();
        let n = net.n_dof;
        let nf = net.friction.len();
        let nl = net.laws.len();
        let nk = net.kinematic.len();
        let rmax = net.rows.len() + nf + nk;
        let v = |k: usize| vec![0.0; k];
        Work {
            sig: [v(net.signals.len()), v(net.signals.len()), v(net.signals.len())],
            f: v(nn),
            q0: v(n),
            q: v(2 * n),
            stage_g: v(2 * n),
            lam_start: v(rmax),
            lam: v(rmax),
            caps: vec![Capacity { free: true, tau0: 0.0, tau_max: 0.0, one_way: false }; nf],
            sig_end: v(net.signals.len()),
            dep_tau: v(n.max(nf)),
            dependent_input: v(nf),
            f_end: v(nn),
            lam_end: v(rmax),
            cached: Cached::NONE,
            qp: QpWork::new(nf, nn),
            presc_speed: [v(nn), v(nn), v(nn), v(nn)],
            presc_acc: [v(nn), v(nn), v(nn), v(nn)],
            fric_tau: [v(nf), v(nf)],
            fric_power_end: v(nf),
            dep_tau_end: v(nf),
            law_tau_end: v(nl),
            law_diss_end: v(nl),
            fric_tau_end: v(nf),
        }
    }
}

impl Scratch {
    /// The empty scratch a simulation holds between its steps.
    pub(super) fn placeholder() -> Self {
        let none = ScratchShape { n: 0, nodes: 0, friction: 0, laws: 0, rows: 0, m: 0 };
        Scratch { shape: None, ..Scratch::new(none) }
    }

    /// Buffers for networks of `shape`.
    fn new(shape: ScratchShape) -> Self {
        let ScratchShape { n, nodes: nn, friction: nf, laws: nl, rows: rmax, m } = shape;
        let v = |k: usize| vec![0.0; k];
        let mut s = Scratch {
            shape: Some(shape),
            lease: (0, 0),
            scratch_n: v(n),
            xnz: vec![(0, 0.0); n],
            slip_theta: v(nf),
            phi_st: [v(nn), v(nn)],
            w_st: [v(nn), v(nn)],
            res: v(2 * n),
            q_last: v(2 * n),
            q_dir: v(2 * n),
            phi1: v(nn),
            w1: v(nn),
            phi_e: v(nn),
            w_e: v(nn),
            acc: v(nn),
            jac_phi: v(n * n),
            jac_w: v(n * n),
            scratch_r: v(rmax),
            dep_scratch: v(nn),
            f_st: [v(nn), v(nn)],
            lam_st: [v(rmax), v(rmax)],
            newton_failed: false,
            singular: None,
            ground_zero: false,
            qp: QpScratch::new(nf),
            newton_inv: v(4 * n * n),
            newton_tmp: v(4 * n * n + 2 * n),
            newton_piv: vec![0; 2 * n],
            phi_save: v(nn),
            w_save: v(nn),
            law_power: [v(nl), v(nl)],
            law_diss: [v(nl), v(nl)],
            fric_power: [v(nf), v(nf)],
        };
        s.size_newton(m);
        s
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

/// The warm start of a mode selection's box QP: the simulation's own.
#[derive(Debug, Clone)]
pub(super) struct QpWork {
    /// Last complementarity solution per friction element (warm start of the next solve).
    pub(super) warm_x: Vec<f64>,
    pub(super) warm_state: Vec<i8>,
    pub(super) warm_ok: Vec<bool>,
    /// Generalised forces of the elements released during the last mode selection (a lock
    /// group's check reads them as that selection left them).
    pub(super) extra: Vec<f64>,
}

impl QpWork {
    /// The warm start for `nf` friction elements in a network of `nn` nodes.
    fn new(nf: usize, nn: usize) -> Self {
        QpWork { warm_x: vec![0.0; nf], warm_state: vec![0; nf], warm_ok: vec![false; nf], extra: vec![0.0; nn] }
    }
}

/// The box QP of a mode selection (`k` candidates of `nf` friction elements) and the reuse of
/// its factors: part of the thread's [`Scratch`].
#[derive(Debug)]
pub(super) struct QpScratch {
    pub(super) w: Vec<f64>,
    pub(super) b: Vec<f64>,
    pub(super) x: Vec<f64>,
    pub(super) lo: Vec<f64>,
    pub(super) hi: Vec<f64>,
    pub(super) state: Vec<i8>,
    pub(super) idx: Vec<usize>,
    pub(super) fact: Vec<f64>,
    pub(super) rhs: Vec<f64>,
    pub(super) piv: Vec<usize>,
    /// What `qp_fact`/`qp_piv` hold: the LU factors of the free block (mask over positions in
    /// `qp_idx`, `u64::MAX` when none) of the matrix identified by `qp_matrix`
    /// (base slot key, its generation, candidate mask). A solve on the same matrix and free set
    /// reuses them: bitwise the factors a fresh factorisation would give. Valid only for the
    /// simulation that formed them ([`ScratchLease`]).
    pub(super) factored: u64,
    pub(super) matrix: (u64, u64, u64),
    /// The Tikhonov term on the diagonal of `qp_w`.
    pub(super) eps: f64,
    pub(super) new_modes: Vec<FrictionMode>,
    pub(super) candidate: Vec<bool>,
}

impl QpScratch {
    /// Buffers for `nf` friction elements.
    fn new(nf: usize) -> Self {
        let v = |k: usize| vec![0.0; k];
        QpScratch {
            w: v(nf * nf),
            b: v(nf),
            x: v(nf),
            lo: v(nf),
            hi: v(nf),
            state: vec![0; nf],
            idx: vec![0; nf],
            fact: v(nf * nf),
            rhs: v(nf),
            piv: vec![0; nf],
            factored: u64::MAX,
            matrix: (u64::MAX, 0, 0),
            eps: 0.0,
            new_modes: vec![FrictionMode::Free; nf],
            candidate: vec![false; nf],
        }
    }

    /// Forgets the matrix and factors held: they were another simulation's.
    fn forget(&mut self) {
        self.factored = u64::MAX;
        self.matrix = (u64::MAX, 0, 0);
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

/// The scratch sets a thread lends to the simulations it steps: one per network shape, taken
/// for the length of a step and given back after it (no allocation once every shape the
/// thread steps has its set). A simulation that borrows a set leaves its empty placeholder in
/// the set's place meanwhile.
struct ScratchPool {
    /// This thread's number, from 1 (0: not numbered yet; see [`ScratchLease`]).
    thread: u64,
    /// The leases this thread has made.
    count: u64,
    /// (Boxed: a lending swaps a pointer with the simulation's, not the set's some hundred
    /// bytes of vector headers.)
    #[allow(clippy::vec_box)]
    sets: Vec<Box<Scratch>>,
}

impl ScratchPool {
    /// A set for `shape` added (the first step of a shape on this thread); returns its index.
    #[cold]
    #[inline(never)]
    fn add(&mut self, shape: ScratchShape) -> usize {
        self.sets.push(Box::new(Scratch::new(shape)));
        self.sets.len() - 1
    }
}

/// Numbers the threads that lend scratch.
static THREADS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

thread_local! {
    static POOL: RefCell<ScratchPool> = const { RefCell::new(ScratchPool { thread: 0, count: 0, sets: Vec::new() }) };
}

/// Which lending of a scratch set a simulation had last, `(thread, lease on that thread)`:
/// when the set it borrows next was last lent to it, the complementarity factors and the
/// stage forces the set holds are still this simulation's; else they are forgotten (and
/// formed again, to the same bits, when needed).
pub(super) type ScratchLease = (u64, u64);

impl Simulation {
    /// Hints the state the next step reads toward the cache (`Vehicle::prefetch`): every stage
    /// of [`Simulation::prefetch_stage`] at once. Changes no result.
    pub fn prefetch(&self) {
        for stage in 0..crate::prefetch::STAGES {
            self.prefetch_stage(stage);
        }
    }

    /// One stage of [`Simulation::prefetch`] (see [`crate::prefetch::STAGES`]): 0 the
    /// simulation's own bytes, 1 the buffers they point to, 2 the buffers those point to. Each
    /// stage reads only what the stage before hinted, so a fleet that runs the stages on
    /// vehicles one apart waits on no miss of its own. Changes no result.
    pub fn prefetch_stage(&self, stage: usize) {
        use crate::prefetch::{slice, value};
        match stage {
            0 => value(self),
            1 => {
                slice(&self.phi);
                slice(&self.w);
                slice(&self.modes);
                slice(&self.regimes);
                slice(&self.out_tau);
                slice(&self.out_power);
                // The current slot and its Newton inverse alone: the other slots are read when
                // the mode changes, the reduced Jacobians and the pivots when the Newton matrix
                // is formed.
                if let Some(slot) = self.slots.get(self.cur) {
                    value(slot);
                }
                slice(&self.newton.sets);
                let p = &self.pred;
                slice(&p.q0);
                slice(&p.q);
                slice(&p.g);
                slice(&p.g_end);
                let c = &self.signals;
                slice(&c.unsteady);
                slice(&c.unsteady_other);
                slice(&c.held);
                slice(&c.held_value);
                slice(&c.sine_state);
                slice(&self.inputs.steps);
                slice(&self.inputs.step_pos);
                slice(&self.inputs.changes);
                slice(&self.friction.watch_list);
                self.ws.prefetch();
                self.kernel.prefetch();
            }
            2 => {
                if let Some(slot) = self.slots.get(self.cur) {
                    slice(&slot.weight_caps);
                    if let Some(set) = self.newton.sets.get(slot.newton) {
                        slice(&set.newton_inv);
                    }
                }
            }
            _ => {}
        }
    }
}

impl Work {
    /// Hints the carried buffers toward the cache ([`Simulation::prefetch`]).
    fn prefetch(&self) {
        use crate::prefetch::slice;
        for v in self.sig.iter().chain(self.presc_speed.iter()).chain(self.presc_acc.iter()) {
            slice(v);
        }
        for v in [
            &self.sig_end,
            &self.q0,
            &self.q,
            &self.stage_g,
            &self.f,
            &self.lam,
            &self.lam_start,
            &self.dep_tau,
            &self.dependent_input,
            &self.f_end,
            &self.lam_end,
            &self.fric_tau[0],
            &self.fric_tau[1],
            &self.fric_power_end,
            &self.dep_tau_end,
            &self.law_tau_end,
            &self.law_diss_end,
            &self.fric_tau_end,
            &self.qp.warm_x,
            &self.qp.extra,
        ] {
            slice(v);
        }
        slice(&self.caps);
        slice(&self.qp.warm_state);
        slice(&self.qp.warm_ok);
    }
}

impl Simulation {
    /// Borrows this thread's scratch for the simulation's network shape (see [`Scratch`]).
    /// Returns false when the simulation holds one already (a nested call): only the call
    /// that took it gives it back.
    pub(super) fn take_scratch(&mut self) -> bool {
        if self.sc.shape.is_some() {
            return false;
        }
        let shape = Some(self.scratch_shape);
        let foreign = POOL.with_borrow_mut(|pool| {
            if pool.thread == 0 {
                pool.thread = THREADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            // (A thread mostly steps simulations of one shape: its set is the last one.)
            let i = match pool.sets.iter().rposition(|s| s.shape == shape) {
                Some(i) => i,
                None => pool.add(self.scratch_shape),
            };
            pool.count += 1;
            let lease = (pool.thread, pool.count);
            let set = &mut pool.sets[i];
            let foreign = set.lease != self.lease || cfg!(feature = "scratch-poison");
            set.lease = lease;
            self.lease = lease;
            std::mem::swap(&mut self.sc, set);
            foreign
        });
        if foreign {
            #[cfg(feature = "scratch-poison")]
            self.sc.poison();
            self.sc.qp.forget();
            self.ws.cached.remove(Cached::STAGE_FORCES);
            self.ws.cached.remove(Cached::STAGE_TORQUES);
            self.ground_scratch();
        }
        true
    }

    /// Gives the scratch taken by [`Simulation::take_scratch`] back to the thread (when `took`),
    /// into the place where the simulation's placeholder waits.
    pub(super) fn give_back_scratch(&mut self, took: bool) {
        if !took {
            return;
        }
        POOL.with_borrow_mut(|pool| {
            let shape = self.sc.shape;
            match pool.sets.iter_mut().rev().find(|s| s.shape.is_none()) {
                Some(place) => std::mem::swap(&mut self.sc, place),
                // (Not reached: the placeholder waits in the pool while the set is out.)
                None => pool.sets.push(std::mem::replace(&mut self.sc, Box::new(Scratch::placeholder()))),
            }
            debug_assert!(self.sc.shape.is_none() && pool.sets.iter().any(|s| s.shape == shape));
        });
    }
}
