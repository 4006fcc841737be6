//! Mode compilation: the null space of the active rigid constraints and the maps that follow from it.

use super::*;

/// One compiled mode: the null space of the active rigid constraints and what follows from it.
/// A pure function of the network's structure and parameters, the lock pattern and, for a
/// redundant mode only, the locked elements' limits at compile time (`weight_caps`): one copy
/// serves every simulation of the same network ([`ModeLibrary`]), read-only once compiled.
#[derive(Debug, Clone)]
pub(super) struct CompiledMode {
    /// The lock pattern it was compiled for (see [`Simulation::lock_key`]).
    pub(super) key: u64,
    /// Compiled (false: a blank of the library's pool, or the empty mode).
    pub(super) compiled: bool,
    pub(super) m: usize,
    /// Active rows: permanent rows then locked friction rows; `r` of them.
    pub(super) r: usize,
    /// The null-space basis `N` of the active rows and its sparse forms.
    pub(super) basis: NullSpace,
    /// Reduced inertia `Mr = N^T M N` (`m x m`) and its LU factors.
    pub(super) mr: Vec<f64>,
    pub(super) mr_lu: Vec<f64>,
    pub(super) mr_piv: Vec<usize>,
    /// Constraint torques directly from forces: `lambda = T (f - M u)` with
    /// `T = L (M N Mr^-1 N^T - I)` (`r x n`), `u` the prescribed acceleration. Stored by
    /// columns (column `k` at `k * rstride`): forces are sparse, so the product runs over the
    /// columns of the non-zero forces, each a contiguous `r`-vector. [`MAP_PAD`] entries past
    /// the last column let a product read whole lanes of four ([`map_columns_from`]).
    pub(super) tmap: Vec<f64>,
    /// Column stride of `tmap` and `tmap_w` (the largest row count of the network).
    pub(super) rstride: usize,
    /// Redundant modes only: the same map for a capacity-weighted split (regularisation
    /// `eps_i = eps (c_max / c_i)^2` per row, clamped to `[1, 1e6] eps`, capacities at compile
    /// time), which loads the stronger of two parallel locks. A certificate only: telemetry
    /// keeps the minimum-norm split.
    pub(super) tmap_w: Vec<f64>,
    /// The static limits of the locked elements `tmap_w` weighs by, N m (per locked row, at
    /// compile time): with the lock pattern, what a redundant mode depends on.
    pub(super) weight_caps: Vec<f64>,
    /// The permanent rows whose torques the locked elements' limits read (a limited-slip
    /// pack's input rows, a LossyGear's gear row). With `stage_rows_all` false, the stage
    /// constraint torques are evaluated on these and the lock rows only: the stage samples
    /// serve the break-away tests (per element, or a redundant group's minimum-norm
    /// certificate), which read nothing else.
    pub(super) stage_extra: CapVec<u32>,
    /// Evaluate every row at the stages: the work of prescribed rows reads theirs, and their
    /// accelerations enter the map.
    pub(super) stage_rows_all: bool,
    /// Friction index of each locked row (after the permanent rows).
    pub(super) locked: CapVec<usize>,
    /// Kinematic clutch index of each engaged row (after the locked friction rows).
    pub(super) kin: CapVec<usize>,
    /// Rows with a prescribed right-hand side `row . w = rho(t)`: (active row, source).
    pub(super) rhs: CapVec<(usize, Rhs)>,
    /// Particular solution of each rhs row for a unit `rho` (`n` each), zero on free columns.
    pub(super) pmat: Vec<f64>,
    pub(super) linear: bool,
    /// Some active rows repeat others (two locks on one relative motion): the lock torques are
    /// then checked by the complementarity problem, not per element.
    pub(super) redundant: bool,
    /// A base mode's (no friction element locked) complementarity data, derived when it is
    /// compiled (see [`CompiledMode::derive_qp`]): `W = R A R^T` (`nf x nf`) and `B = R A`
    /// (`nf x n`), `A = N Mr^-1 N^T` the acceleration response to generalised forces under the
    /// base constraints, `R` the friction rows. Zero in the other modes.
    pub(super) qp_w: Vec<f64>,
    pub(super) qp_b: Vec<f64>,
}

/// A simulation's entry in its mode cache: a compiled mode (shared) and what this simulation
/// keeps of its own for it (its use, the limits it asked for, the Jacobian and Newton factors).
#[derive(Debug, Clone)]
pub(super) struct ModeSlot {
    pub(super) key: u64,
    /// Bumped on every compile, so data derived from a slot can tell it is stale.
    pub(super) generation: u64,
    pub(super) valid: bool,
    pub(super) age: u64,
    /// The compiled mode (the library's empty mode while the slot is not valid).
    pub(super) mode: Arc<CompiledMode>,
    /// The static limits of the locked elements when this simulation filled the slot, N m
    /// (those `mode.weight_caps` holds for a redundant mode).
    pub(super) weight_caps: Vec<f64>,
    /// The Jacobian and Newton factors lent to this slot ([`NewtonPool`]), [`NO_FACTORS`]
    /// when it holds none (its `newton_h` is then not a number).
    pub(super) newton: usize,
    /// A bound on the squared angular frequency of the mode's fastest oscillation at its last
    /// Jacobian, 1/s^2: `||Mr^-1 Kr||_inf` (infinite until a Jacobian is evaluated).
    pub(super) omega2: f64,
    /// The step the slot's Newton factors are for, s (not a number: none formed).
    pub(super) newton_h: f64,
    /// The mode epoch ([`Simulation::epoch`]) `dr`/`kr` were evaluated in: a nonlinear mode
    /// reuses its Jacobian (and the Newton factors) over the steps of one epoch while the
    /// iteration contracts fast.
    pub(super) jac_epoch: u64,
    /// The last Newton iteration converged slowly on the reused Jacobian: refresh it.
    pub(super) jac_stale: bool,
    /// Sub-steps integrated on the current Jacobian since it was evaluated.
    pub(super) jac_uses: u32,
}

impl std::ops::Deref for ModeSlot {
    type Target = CompiledMode;
    #[inline(always)]
    fn deref(&self) -> &CompiledMode {
        &self.mode
    }
}

impl CompiledMode {
    /// `w = N q` (the node speeds for reduced speeds `q`) into `w[..n]`. A row sums its terms
    /// from -0.0 in ascending columns (so a row of one term is that term, sign of zero kept).
    #[inline]
    pub(super) fn n_times(&self, q: &[f64], w: &mut [f64]) {
        // (Not `n_times_each::<1>`: its arrays of slices cost more instructions than they save.)
        if self.basis.nz_single {
            // (-0.0 + x is x for every x: the one term is the row's sum.)
            for (w, &(j, c)) in w.iter_mut().zip(&self.basis.gather) {
                *w = q.get(j as usize).map_or(-0.0, |q| c * q);
            }
            return;
        }
        w.fill(-0.0);
        for &(k, j, c) in self.basis.nz.iter() {
            w[k as usize] += c * q[j as usize];
        }
    }

    /// [`ModeSlot::n_times`] of the two stages and the end at once (the time-only kernel's
    /// three samples), in one pass over `N`: each result exactly as `n_times` forms it.
    #[inline(always)]
    pub(super) fn n_times3(&self, q: [&[f64]; 3], w: [&mut [f64]; 3]) {
        let [q0, q1, q2] = q;
        let [w0, w1, w2] = w;
        if self.basis.nz_single {
            let m = q0.len().min(q1.len()).min(q2.len());
            let (q0, q1, q2) = (&q0[..m], &q1[..m], &q2[..m]);
            for (((w0, w1), w2), &(j, c)) in w0.iter_mut().zip(w1.iter_mut()).zip(w2.iter_mut()).zip(&self.basis.gather)
            {
                let j = j as usize;
                (*w0, *w1, *w2) = if j < m { (c * q0[j], c * q1[j], c * q2[j]) } else { (-0.0, -0.0, -0.0) };
            }
            return;
        }
        self.n_times(q0, w0);
        self.n_times(q1, w1);
        self.n_times(q2, w2);
    }

    /// [`ModeSlot::n_times`] of `K` vectors at once (the two stages), in one pass over `N`:
    /// each result exactly as `n_times` forms it.
    #[inline]
    pub(super) fn n_times_each<const K: usize>(&self, q: [&[f64]; K], w: [&mut [f64]; K]) {
        let mut w = w;
        if self.basis.nz_single {
            // (-0.0 + x is x for every x: the one term is the row's sum.)
            let n = w[0].len();
            for (k, &(j, c)) in self.basis.gather[..n].iter().enumerate() {
                for (w, q) in w.iter_mut().zip(q) {
                    w[k] = q.get(j as usize).map_or(-0.0, |q| c * q);
                }
            }
            return;
        }
        for w in w.iter_mut() {
            w.fill(-0.0);
        }
        for &(k, j, c) in self.basis.nz.iter() {
            for (w, q) in w.iter_mut().zip(q) {
                w[k as usize] += c * q[j as usize];
            }
        }
    }

    /// `g = N^T x` (the reduced forces of node forces `x`) into `g[..m]`: each entry sums its
    /// terms from +0.0 in ascending rows.
    #[inline]
    pub(super) fn nt_times(&self, x: &[f64], g: &mut [f64]) {
        match self.m {
            1 => return self.nt_times_dense::<1>(x, g),
            2 => return self.nt_times_dense::<2>(x, g),
            3 => return self.nt_times_dense::<3>(x, g),
            4 => return self.nt_times_dense::<4>(x, g),
            5 => return self.nt_times_dense::<5>(x, g),
            6 => return self.nt_times_dense::<6>(x, g),
            7 => return self.nt_times_dense::<7>(x, g),
            8 => return self.nt_times_dense::<8>(x, g),
            _ => {}
        }
        for (j, g) in g[..self.m].iter_mut().enumerate() {
            let col = &self.basis.nzt[self.basis.nzt_col[j] as usize..self.basis.nzt_col[j + 1] as usize];
            *g = col.iter().fold(0.0, |acc, &(k, c)| acc + c * x[k as usize]);
        }
    }

    /// [`ModeSlot::nt_times`] for `M = m` columns over the dense rows of `N`, in registers:
    /// the zero entries' terms are signed zeros, which change no sum that starts from +0.0
    /// (a finite `x` assumed: a step with a non-finite force fails either way), so each entry
    /// is the sparse sum, bit for bit.
    #[inline]
    pub(super) fn nt_times_dense<const M: usize>(&self, x: &[f64], g: &mut [f64]) {
        let n = self.basis.nz_row.len() - 1;
        let mut acc = [0.0; M];
        for (row, &xk) in self.basis.nmat.chunks_exact(n).zip(&x[..n]) {
            let row = &row[..M];
            for j in 0..M {
                acc[j] += row[j] * xk;
            }
        }
        g[..M].copy_from_slice(&acc);
    }

    /// Grows the `m x m` buffers to hold a mode with `m` free coordinates.
    pub(super) fn reserve(&mut self, m: usize) {
        if self.mr.len() < m * m {
            self.mr.resize(m * m, 0.0);
            self.mr_lu.resize(m * m, 0.0);
            self.mr_piv.resize(m, 0);
        }
    }

    /// A blank mode for a network of shape `s` whose modes keep at most `mmax` free
    /// coordinates (the `m x m` matrices are sized by it).
    pub(super) fn blank(s: &ModeShape, mmax: usize) -> Self {
        let ModeShape { n, rmax, nrhs, nf } = *s;
        Self {
            key: 0,
            compiled: false,
            m: 0,
            r: 0,
            basis: NullSpace {
                nmat: vec![0.0; n * n],
                nz: CapVec::new(n * mmax),
                nz_row: vec![0; n + 1],
                nzt: CapVec::new(n * mmax),
                nzt_col: vec![0; n + 1],
                nz_single: false,
                gather: vec![(u32::MAX, 0.0); n],
                free_cols: vec![0; n],
            },
            mr: vec![0.0; mmax * mmax],
            mr_lu: vec![0.0; mmax * mmax],
            mr_piv: vec![0; mmax],
            tmap: vec![0.0; rmax * n + MAP_PAD],
            rstride: rmax,
            tmap_w: vec![0.0; rmax * n + MAP_PAD],
            weight_caps: vec![0.0; nf],
            stage_extra: CapVec::new(2 * nf),
            stage_rows_all: true,
            locked: CapVec::new(nf),
            kin: CapVec::new(rmax),
            rhs: CapVec::new(nrhs),
            pmat: vec![0.0; nrhs * n],
            linear: false,
            redundant: false,
            qp_w: vec![0.0; nf * nf],
            qp_b: vec![0.0; nf * n],
        }
    }

    /// Back to a blank's contents (the buffers kept): a mode compiled into a recycled entry
    /// reads nothing its predecessor left.
    pub(super) fn clear(&mut self) {
        self.compiled = false;
        self.key = 0;
        self.m = 0;
        self.r = 0;
        let b = &mut self.basis;
        b.nmat.fill(0.0);
        b.nz.clear();
        b.nz_row.fill(0);
        b.nzt.clear();
        b.nzt_col.fill(0);
        b.nz_single = false;
        b.gather.fill((u32::MAX, 0.0));
        b.free_cols.fill(0);
        for v in [
            &mut self.mr,
            &mut self.mr_lu,
            &mut self.tmap,
            &mut self.tmap_w,
            &mut self.weight_caps,
            &mut self.pmat,
            &mut self.qp_w,
            &mut self.qp_b,
        ] {
            v.fill(0.0);
        }
        self.mr_piv.fill(0);
        self.stage_extra.clear();
        self.stage_rows_all = true;
        self.locked.clear();
        self.kin.clear();
        self.rhs.clear();
        self.linear = false;
        self.redundant = false;
    }

    /// True when this compiled mode is the one lock pattern `key` with the locked elements'
    /// limits `caps` compiles to: the limits matter to a redundant mode only.
    pub(super) fn serves(&self, key: u64, caps: &[f64]) -> bool {
        self.compiled
            && self.key == key
            && (!self.redundant
                || self.weight_caps[..self.locked.len()].iter().zip(caps).all(|(a, b)| a.to_bits() == b.to_bits()))
    }

    /// Compiles the mode with lock pattern `key` of `net`, the weighted map (a redundant
    /// mode's) from the limits `caps`, one per locked element in element order.
    pub(super) fn compile(&mut self, net: &Network, key: u64, caps: &[f64], cw: &mut CompileWork) {
        self.set_rows(net, key);
        let nl = self.locked.len();
        self.weight_caps[..nl].copy_from_slice(&caps[..nl]);
        let rank = null_space(net, self, cw);
        self.reduced_inertia(net);
        if self.r > 0 {
            constraint_torque_maps(net, self, cw, rank);
        }
        self.select_stage_rows(net);
        self.linear = net.laws.iter().all(Law::is_linear)
            && net.friction.iter().enumerate().all(|(i, fe)| key & (1 << i) != 0 || fe.law.is_speed_independent());
        if key & low_bits(net.friction.len()) == 0 {
            self.derive_qp(net, &mut cw.acc);
        }
        self.compiled = true;
    }

    /// Derives [`CompiledMode::qp_w`] and [`CompiledMode::qp_b`] of a base mode, `col` an
    /// `n`-vector of scratch. Derived once per mode for every simulation of the network that
    /// shares it (each simulation of a fleet derived its own copy before).
    fn derive_qp(&mut self, net: &Network, col: &mut [f64]) {
        let n = net.n_dof;
        let nf = net.friction.len();
        let m = self.m;
        // B row i = (R_i N) Mr^-1 N^T; friction rows have at most three entries.
        for i in 0..nf {
            let row = net.friction[i].row;
            for j in 0..m {
                col[j] = row
                    .entries
                    .iter()
                    .map(|&(k, c)| if c != 0.0 && k < n { c * self.basis.nmat[k * n + j] } else { 0.0 })
                    .sum();
            }
            linalg::lu_solve(&self.mr_lu, m, &self.mr_piv, &mut col[..m]); // symmetric: row vector
            for k in 0..n {
                self.qp_b[i * n + k] = (0..m).map(|j| col[j] * self.basis.nmat[k * n + j]).sum();
            }
        }
        for i in 0..nf {
            for j in 0..nf {
                let rj = net.friction[j].row;
                self.qp_w[i * nf + j] = rj
                    .entries
                    .iter()
                    .map(|&(k, c)| if c != 0.0 && k < n { c * self.qp_b[i * n + k] } else { 0.0 })
                    .sum();
            }
        }
    }
}

impl ModeSlot {
    /// A slot holding no mode (`empty`), with limits for `nf` friction elements.
    pub(super) fn new(empty: Arc<CompiledMode>, nf: usize) -> Self {
        Self {
            key: 0,
            generation: 0,
            valid: false,
            age: 0,
            mode: empty,
            weight_caps: vec![0.0; nf],
            newton: NO_FACTORS,
            omega2: f64::INFINITY,
            newton_h: f64::NAN,
            jac_epoch: u64::MAX,
            jac_stale: true,
            jac_uses: 0,
        }
    }
}

/// No Newton factors lent ([`ModeSlot::newton`]).
pub(super) const NO_FACTORS: usize = usize::MAX;

/// A mode's Jacobian and Newton factors.
#[derive(Debug, Clone)]
pub(super) struct NewtonFactors {
    /// The reduced Jacobian, `Dr = N^T (df/dw) N` and `Kr = N^T (df/dphi) N` (`m x m`).
    pub(super) dr: Vec<f64>,
    pub(super) kr: Vec<f64>,
    /// The inverse of the Newton matrix for the slot's `newton_h` (`2m x 2m`; its LU factors
    /// while it is formed, pivots in `newton_piv`).
    pub(super) newton_inv: Vec<f64>,
    pub(super) newton_piv: Vec<usize>,
    /// The slot it is lent to ([`NO_FACTORS`]: none), and the pool's clock at its last use.
    owner: usize,
    used: u64,
}

impl NewtonFactors {
    fn new(m: usize) -> Self {
        NewtonFactors {
            dr: vec![0.0; m * m],
            kr: vec![0.0; m * m],
            newton_inv: vec![0.0; 4 * m * m],
            newton_piv: vec![0; 2 * m],
            owner: NO_FACTORS,
            used: 0,
        }
    }

    /// Grows the buffers to hold a mode with `m` free coordinates.
    #[inline]
    fn reserve(&mut self, m: usize) {
        if self.dr.len() < m * m {
            self.grow(m);
        }
    }

    /// [`NewtonFactors::reserve`]'s growth.
    #[cold]
    fn grow(&mut self, m: usize) {
        self.dr.resize(m * m, 0.0);
        self.kr.resize(m * m, 0.0);
        self.newton_inv.resize(4 * m * m, 0.0);
        self.newton_piv.resize(2 * m, 0);
    }
}

/// The sets of Jacobian and Newton factors a simulation lends its mode slots, least recently
/// used taken back first.
#[derive(Debug, Clone)]
pub(super) struct NewtonPool {
    pub(super) sets: Vec<NewtonFactors>,
    clock: u64,
}

impl NewtonPool {
    /// `count` sets for modes of up to `mmax` free coordinates.
    pub(super) fn new(count: usize, mmax: usize) -> Self {
        NewtonPool { sets: (0..count).map(|_| NewtonFactors::new(mmax)).collect(), clock: 0 }
    }
}

impl Simulation {
    /// Key of a lock pattern: bit i set when friction element i is stuck.
    pub(super) fn lock_key(modes: &[FrictionMode], kin_engaged: &[bool]) -> u64 {
        let nf = modes.len();
        let k =
            modes.iter().enumerate().fold(0u64, |k, (i, m)| if *m == FrictionMode::Stuck { k | (1 << i) } else { k });
        kin_engaged.iter().enumerate().fold(k, |k, (j, e)| if *e { k | (1 << (nf + j)) } else { k })
    }

    /// Finds or compiles the slot for a lock pattern; returns its index.
    pub(super) fn slot_for(&mut self, key: u64) -> usize {
        self.clock += 1;
        if let Some(i) = self.slots.iter().position(|s| s.valid && s.key == key) {
            self.slots[i].age = self.clock;
            return i;
        }
        // Slot 0 keeps the lock-free mode (needed by the complementarity data).
        let cur = self.cur;
        let victim = (1..self.slots.len())
            .filter(|&i| i != cur)
            .min_by_key(|&i| if self.slots[i].valid { self.slots[i].age } else { 0 })
            .unwrap_or(1);
        self.compile_into(victim, key);
        self.slots[victim].age = self.clock;
        victim
    }

    /// The set of Newton factors of slot `slot` (sized for its mode): its own, or the least
    /// recently used one taken back from another slot (never the current mode's, unless
    /// `slot` is the current mode), whose Jacobian and factors are then gone.
    #[inline]
    pub(super) fn newton_of(&mut self, slot: usize) -> usize {
        let mut b = self.slots[slot].newton;
        if b == NO_FACTORS {
            b = self.lend_newton(slot);
        }
        let m = self.slots[slot].m;
        let pool = &mut self.newton;
        pool.clock += 1;
        let set = &mut pool.sets[b];
        set.used = pool.clock;
        set.reserve(m);
        b
    }

    /// Lends slot `slot`, which holds no set, the least recently used one ([`Simulation::newton_of`]).
    #[cold]
    #[inline(never)]
    fn lend_newton(&mut self, slot: usize) -> usize {
        let pool = &mut self.newton;
        let keep = if slot == self.cur { NO_FACTORS } else { self.slots[self.cur].newton };
        let b = (0..pool.sets.len()).filter(|&b| b != keep).min_by_key(|&b| pool.sets[b].used).unwrap_or(0);
        let owner = pool.sets[b].owner;
        if owner != NO_FACTORS {
            let o = &mut self.slots[owner];
            o.newton = NO_FACTORS;
            o.newton_h = f64::NAN;
            o.jac_epoch = u64::MAX;
            o.jac_stale = true;
        }
        pool.sets[b].owner = slot;
        self.slots[slot].newton = b;
        b
    }

    /// Makes the mode cache `n` slots long: new slots hold no mode, the Newton factors of the
    /// slots cut off go back to the pool.
    pub(super) fn resize_slots(&mut self, n: usize) {
        if n < self.slots.len() {
            for set in &mut self.newton.sets {
                if set.owner != NO_FACTORS && set.owner >= n {
                    set.owner = NO_FACTORS;
                }
            }
            self.slots.truncate(n);
        } else {
            let (empty, nf) = (self.model.modes.empty(), self.model.net.friction.len());
            self.slots.resize_with(n, || ModeSlot::new(empty.clone(), nf));
        }
    }

    /// Swaps mode slots `a` and `b`, with the Newton factors lent to them.
    pub(super) fn swap_slots(&mut self, a: usize, b: usize) {
        self.slots.swap(a, b);
        for k in [a, b] {
            let set = self.slots[k].newton;
            if set != NO_FACTORS {
                self.newton.sets[set].owner = k;
            }
        }
    }

    /// Fills slot `idx` with the mode of lock pattern `key`: the library's copy when it holds
    /// one, else compiled into the library (no allocation while the library has a free entry:
    /// its buffers are sized for the largest case).
    pub(super) fn compile_into(&mut self, idx: usize, key: u64) {
        self.compile_with(idx, key, None);
    }

    /// [`Simulation::compile_into`], the weighted map from the limits `caps` (one per locked
    /// element, in element order) when given, else from the signals in `ws.sig[2]`.
    pub(super) fn compile_with(&mut self, idx: usize, key: u64, caps: Option<&[f64]>) {
        self.stats.mode_compiles += 1;
        let net = &self.model.net;
        let slot = &mut self.slots[idx];
        slot.key = key;
        slot.generation = self.stats.mode_compiles;
        slot.valid = true;
        slot.newton_h = f64::NAN;
        slot.omega2 = f64::INFINITY;
        // The locked elements in element order, and their limits.
        let mut nl = 0;
        for i in bits(key & low_bits(net.friction.len())) {
            slot.weight_caps[nl] = match caps {
                Some(c) => c[nl],
                None => net.friction[i].law.capacity(&self.ws.sig[2]).tau_max.abs(),
            };
            nl += 1;
        }
        // (The slot's old mode goes back first: a simulation alone never needs more entries
        // than it has slots.)
        slot.mode = self.model.modes.empty();
        slot.mode = self
            .model
            .modes
            .acquire(key, &slot.weight_caps[..nl], |mode, cw| mode.compile(net, key, &slot.weight_caps, cw));
    }
}

impl CompiledMode {
    /// Resets the slot for lock pattern `key` (bit `i` locks friction element `i`, bit `nf + j`
    /// engages kinematic clutch `j`) and lists its active rows: the permanent rows, the locked
    /// friction rows, the engaged kinematic clutches' rows, and which of them are prescribed.
    fn set_rows(&mut self, net: &Network, key: u64) {
        self.key = key;
        self.locked.clear();
        self.kin.clear();
        self.rhs.clear();
        let nf = net.friction.len();
        for i in 0..nf {
            if key & (1 << i) != 0 {
                self.locked.push(i);
            }
        }
        for j in 0..net.kinematic.len() {
            if key & (1 << (nf + j)) != 0 {
                self.kin.push(j);
            }
        }
        let (np, nl) = (net.rows.len(), self.locked.len());
        self.r = np + nl + self.kin.len();
        for (i, rhs) in net.row_rhs.iter().enumerate() {
            if let Some(sg) = rhs {
                self.rhs.push((i, Rhs::Source(*sg)));
            }
        }
        for (j, &k) in self.kin.iter().enumerate() {
            self.rhs.push((np + nl + j, Rhs::Clutch(net.kinematic[k].rho_signal)));
        }
    }

    /// Active row `i` of the slot: permanent rows, then locked friction rows, then engaged
    /// kinematic clutches.
    fn row_at<'a>(&self, net: &'a Network, i: usize) -> &'a Row {
        let (np, nl) = (net.rows.len(), self.locked.len());
        if i < np {
            &net.rows[i]
        } else if i < np + nl {
            &net.friction[self.locked[i - np]].row
        } else {
            &net.kinematic[self.kin[i - np - nl]].row
        }
    }

    /// The reduced inertia `Mr = N^T M N` and its LU factors.
    fn reduced_inertia(&mut self, net: &Network) {
        let (n, m) = (net.n_dof, self.m);
        for a in 0..m {
            for b in 0..m {
                self.mr[a * m + b] =
                    (0..n).map(|k| self.basis.nmat[k * n + a] * net.mass[k] * self.basis.nmat[k * n + b]).sum();
            }
        }
        self.mr_lu[..m * m].copy_from_slice(&self.mr[..m * m]);
        if m > 0 {
            // Positive definite by the build checks (adding locks only removes directions).
            let _ = linalg::lu_factor(&mut self.mr_lu, m, &mut self.mr_piv);
        }
    }

    /// The permanent rows whose torques the locked elements' limits read (a limited-slip
    /// pack's input rows, a LossyGear's gear row): the rows the stage break-away samples read.
    fn select_stage_rows(&mut self, net: &Network) {
        self.stage_extra.clear();
        self.stage_rows_all = !self.rhs.is_empty();
        for &i in self.locked.iter() {
            let mut need = |row: usize| {
                if !self.stage_extra.contains(&(row as u32)) && self.stage_extra.has_room() {
                    self.stage_extra.push(row as u32);
                }
            };
            match &net.friction[i].law {
                crate::elements::FrictionLaw::Ramp { input, .. } => {
                    for &(row, c) in input {
                        if c != 0.0 {
                            need(row);
                        }
                    }
                }
                crate::elements::FrictionLaw::Lossy { gear_row, .. } => need(*gear_row),
                _ => {}
            }
        }
    }

    /// The null-space basis `N` (dense, with the free columns as identity) as its sparse forms:
    /// by rows (`nz`, `nz_row`), by columns (`nzt`, `nzt_col`) and, where every row has at most
    /// one non-zero, as a gather list.
    fn sparse_forms(&mut self, n: usize) {
        let m = self.m;
        self.basis.nz.clear();
        for k in 0..n {
            self.basis.nz_row[k] = self.basis.nz.len() as u32;
            for j in 0..m {
                let c = self.basis.nmat[k * n + j];
                if c != 0.0 {
                    self.basis.nz.push((k as u32, j as u32, c));
                }
            }
        }
        self.basis.nz_row[n] = self.basis.nz.len() as u32;
        // The same entries by columns (rows ascending within each).
        self.basis.nzt.clear();
        for j in 0..m {
            self.basis.nzt_col[j] = self.basis.nzt.len() as u32;
            for &(k, col, c) in self.basis.nz.iter() {
                if col as usize == j {
                    self.basis.nzt.push((k, c));
                }
            }
        }
        self.basis.nzt_col[m] = self.basis.nzt.len() as u32;
        self.basis.nz_single = self.basis.nz_row.windows(2).all(|r| r[1] - r[0] <= 1);
        for (k, g) in self.basis.gather.iter_mut().enumerate() {
            let row = &self.basis.nz[self.basis.nz_row[k] as usize..self.basis.nz_row[k + 1] as usize];
            *g = row.first().map_or((u32::MAX, 0.0), |&(_, j, c)| (j, c));
        }
    }
}

/// The constraint matrix `G` (`r x n`, dense, into `cw.g_rows`), the null space of the active
/// rows and the particular solutions of the prescribed ones. Returns the rank of `G`.
fn null_space(net: &Network, slot: &mut CompiledMode, cw: &mut CompileWork) -> usize {
    let (n, r) = (net.n_dof, slot.r);
    let CompileWork { g_rows: g, aug: e, order, place, .. } = cw;
    g[..r * n].fill(0.0);
    for i in 0..r {
        for &(k, c) in &slot.row_at(net, i).entries {
            if c != 0.0 && k < n {
                g[i * n + k] += c;
            }
        }
    }
    // RREF of [G | I]: the left block gives the null space, the right block the row
    // operations, from which the particular solutions of prescribed rows follow. Without
    // prescribed rows the right block is left out: RREF works column by column, so the
    // left block and its pivots come out the same either way.
    // The left block's columns go lightest coordinate first (massless ones, then by inertia
    // or mass, ties by index): RREF makes its pivot columns the dependent coordinates, so the
    // heaviest coordinates of each constrained group stay free. Then `Mr = N^T M N` keeps a
    // light body's inertia on its own diagonal entry instead of as the small difference of a
    // heavy body's projected entries: a load of 3e-12 kg m^2 on a planetary carrier beside a
    // 1 kg m^2 sun, with the sun dependent, gave `Mr` a condition number of 1e13 and Newton
    // corrections with a rounding floor of 1e-9 rad/s, above the tolerance.
    for (k, o) in order[..n].iter_mut().enumerate() {
        *o = k;
    }
    order[..n].sort_unstable_by(|&a, &b| net.mass[a].total_cmp(&net.mass[b]).then(a.cmp(&b)));
    for (j, &k) in order[..n].iter().enumerate() {
        place[k] = j;
    }
    let cols = if slot.rhs.is_empty() { n } else { n + r };
    e[..r * cols].fill(0.0);
    for i in 0..r {
        for (j, &k) in order[..n].iter().enumerate() {
            e[i * cols + j] = g[i * n + k];
        }
        if cols > n {
            e[i * cols + n + i] = 1.0;
        }
    }
    let piv = &mut cw.piv;
    let total = if r > 0 { linalg::rref(e, r, cols, 1e-12, piv) } else { 0 };
    let rank = piv[..total].iter().filter(|&&c| c < n).count();
    slot.redundant = rank < r;
    let m = n - rank;
    slot.m = m;
    // Slots are sized by the base mode, whose free coordinates bound every other mode's.
    // Rounding in a near-degenerate rank decision could in principle break that bound: the
    // slot then grows (an allocation, once) rather than fail.
    slot.reserve(m);
    // Free columns (in coordinate order) and null basis (stored with stride n); `piv` and
    // the columns of `e` are places in `order`.
    let mut fc = 0;
    for c in 0..n {
        if !piv[..rank].contains(&place[c]) {
            slot.basis.free_cols[fc] = c;
            fc += 1;
        }
    }
    slot.basis.nmat[..n * n].fill(0.0);
    for j in 0..m {
        let c = slot.basis.free_cols[j];
        slot.basis.nmat[c * n + j] = 1.0;
        for i in 0..rank {
            slot.basis.nmat[order[piv[i]] * n + j] = -e[i * cols + place[c]];
        }
    }
    slot.sparse_forms(n);
    for (jj, &(ra, _)) in slot.rhs.iter().enumerate() {
        slot.pmat[jj * n..(jj + 1) * n].fill(0.0);
        for i in 0..rank {
            slot.pmat[jj * n + order[piv[i]]] = e[i * cols + n + ra];
        }
    }
    rank
}

/// The constraint-torque maps of a mode with `r > 0` active rows of rank `rank`: `L = (G G^T +
/// eps I)^-1 G` (minimum-norm constraint torques, into `cw.lmap`), `T = L (M N Mr^-1 N^T - I)`
/// into `slot.tmap`, and for a redundant mode the capacity-weighted copy `slot.tmap_w`.
fn constraint_torque_maps(net: &Network, slot: &mut CompiledMode, cw: &mut CompileWork, rank: usize) {
    let (n, m, r) = (net.n_dof, slot.m, slot.r);
    let (np, nl) = (net.rows.len(), slot.locked.len());
    let g = &cw.g_rows;
    // G by columns: the products below run over G's rows all at once, each sum as
    // `linalg::dot` forms it (`columns_dot`).
    let gt = &mut cw.g_cols;
    linalg::transpose(g, r, n, gt, r);
    let gt = &gt[..n * r];
    let ggt = &mut cw.ggt;
    let mut tr: f64 = 0.0;
    for a in 0..r {
        // (g_b . g_a: each product is g_a . g_b's, the sum in the same order.)
        columns_dot(gt, r, &g[a * n..(a + 1) * n], &mut ggt[a * r..(a + 1) * r]);
        tr = tr.max(ggt[a * r + a]);
    }
    let eps = if rank < r { 1e-12 * tr.max(1e-300) } else { 0.0 };
    if rank < r {
        // The weighted copy: permanent and kinematic rows (unlimited) weigh as the
        // strongest lock.
        let cap = |a: usize| {
            if a >= np && a < np + nl { slot.weight_caps[a - np] } else { f64::INFINITY }
        };
        let cmax = (np..np + nl).map(cap).fold(0.0f64, f64::max).max(1e-300);
        let gw = &mut cw.ggt_weighted;
        gw[..r * r].copy_from_slice(&ggt[..r * r]);
        for a in 0..r {
            let c = cap(a).min(cmax);
            let f = if c > 0.0 { (cmax / c).powi(2).clamp(1.0, 1e6) } else { 1e6 };
            gw[a * r + a] += eps * f;
        }
        let _ = linalg::lu_factor(gw, r, &mut cw.piv_weighted);
    }
    for a in 0..r {
        ggt[a * r + a] += eps;
    }
    let rp = &mut cw.piv;
    let _ = linalg::lu_factor(ggt, r, rp);
    // L = (G G^T)^-1 G, all of G's columns solved at once, then stored by columns.
    let x = &mut cw.aug[..r * n];
    x.copy_from_slice(&g[..r * n]);
    linalg::lu_solve_many(ggt, r, rp, x, n);
    linalg::transpose(x, r, n, &mut cw.lmap, r);
    // T column k = L (M N Mr^-1 N^T e_k - e_k). The solves for all k at once: Q =
    // Mr^-1 N^T by rows (`Q[j][k]`), and the weighted copy's right-hand sides gathered
    // by rows and solved after the loop (each column as one solve would give it).
    let qm = &mut cw.mr_inv_nt[..m * n];
    for (k, nk) in slot.basis.nmat[..n * n].chunks_exact(n).enumerate() {
        for (j, &x) in nk[..m].iter().enumerate() {
            qm[j * n + k] = x;
        }
    }
    if m > 0 {
        linalg::lu_solve_many(&slot.mr_lu, m, &slot.mr_piv, qm, n);
    }
    let v = &mut cw.acc;
    let wm = &mut cw.weighted_rhs[..r * n];
    let rs = slot.rstride;
    for k in 0..n {
        for (i, vi) in v[..n].iter_mut().enumerate() {
            // M_i (N_i . q_k), the sum as `linalg::dot` forms it.
            let mut d = -0.0;
            for (j, &x) in slot.basis.nmat[i * n..i * n + m].iter().enumerate() {
                d += x * qm[j * n + k];
            }
            *vi = net.mass[i] * d;
        }
        v[k] -= 1.0;
        columns_dot(&cw.lmap[..n * r], r, &v[..n], &mut slot.tmap[k * rs..k * rs + r]);
        if rank < r {
            let col = &mut cw.scratch_r;
            columns_dot(gt, r, &v[..n], &mut col[..r]);
            for (a, &c) in col[..r].iter().enumerate() {
                wm[a * n + k] = c;
            }
        }
    }
    if rank < r {
        linalg::lu_solve_many(&cw.ggt_weighted, r, &cw.piv_weighted, wm, n);
        linalg::transpose(wm, r, n, &mut slot.tmap_w, rs);
    }
}

#[cfg(test)]
mod tests {
    use crate::{Scenario, Simulation};

    fn shipped(file: &str) -> Simulation {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/scenarios").join(file);
        let (_, net) = Scenario::load_network(&path).expect("shipped scenario");
        Simulation::new(net)
    }

    /// Every mode of a network with gears and clutches compiles to a null space `N` of its
    /// active rows `G` (`G N = 0`, `m = n - rank`), the reduced inertia `Mr = N^T M N`, and a
    /// constraint-torque map `T` whose torques make the motion consistent: for any forces
    /// `f`, `a = N Mr^-1 N^T f` and `lambda = T f` satisfy `M a - f = G^T lambda`.
    #[test]
    fn modes_compile_to_a_consistent_null_space_and_torque_map() {
        for (file, keys) in
            [("msl/CoupledClutches.ron", &[0u64, 1, 2, 4, 3, 5, 6, 7][..]), ("msl/SimpleGearShift.ron", &[0, 1, 2, 3])]
        {
            let mut sim = shipped(file);
            let n = sim.model.n_dof;
            let nf = sim.model.net.friction.len();
            for &key in keys.iter().filter(|&&k| k < 1 << nf) {
                sim.compile_into(1, key);
                let s = &sim.slots[1];
                let (m, r) = (s.m, s.r);
                assert_eq!(s.locked.len(), key.count_ones() as usize, "{file} key {key}");
                // G from the active rows (the mode may come from the library, compiled by
                // another simulation of the same network).
                let mut g = vec![0.0; r * n];
                for i in 0..r {
                    for &(k, c) in &s.row_at(&sim.model.net, i).entries {
                        if c != 0.0 && k < n {
                            g[i * n + k] += c;
                        }
                    }
                }
                // G N = 0: the rows have entries of order one (gear ratios up to ~4).
                for i in 0..r {
                    for j in 0..m {
                        let gn: f64 = (0..n).map(|k| g[i * n + k] * s.basis.nmat[k * n + j]).sum();
                        assert!(gn.abs() < 1e-12, "{file} key {key}: (G N)[{i}][{j}] = {gn}");
                    }
                }
                // Mr = N^T M N, symmetric.
                let mass = &sim.model.net.mass;
                for a in 0..m {
                    for b in 0..m {
                        let mr: f64 = (0..n).map(|k| s.basis.nmat[k * n + a] * mass[k] * s.basis.nmat[k * n + b]).sum();
                        assert_eq!(s.mr[a * m + b], mr, "{file} key {key}");
                        assert_eq!(s.mr[a * m + b], s.mr[b * m + a], "{file} key {key}");
                    }
                }
                // M a - f = G^T lambda for a force on every node.
                let f: Vec<f64> = (0..n).map(|k| 1.0 + k as f64 * 0.37 - (k % 3) as f64).collect();
                let mut g_red: Vec<f64> =
                    (0..m).map(|j| (0..n).map(|k| s.basis.nmat[k * n + j] * f[k]).sum()).collect();
                crate::linalg::lu_solve(&s.mr_lu, m, &s.mr_piv, &mut g_red);
                let a: Vec<f64> = (0..n).map(|k| (0..m).map(|j| s.basis.nmat[k * n + j] * g_red[j]).sum()).collect();
                let lam: Vec<f64> = (0..r).map(|i| (0..n).map(|k| s.tmap[k * s.rstride + i] * f[k]).sum()).collect();
                let scale = f.iter().fold(1.0f64, |x, v| x.max(v.abs()));
                for k in 0..n {
                    let gt_lam: f64 = (0..r).map(|i| g[i * n + k] * lam[i]).sum();
                    let resid = mass[k] * a[k] - f[k] - gt_lam;
                    // Rounding through one LU solve and two products of a few terms each.
                    assert!(resid.abs() < 1e-10 * scale, "{file} key {key} node {k}: residual {resid}");
                }
            }
        }
    }
}

/// The null-space basis `N` of a mode's active rows (`n x m`, stride `n`, identity on the free
/// columns) and the sparse forms the per-step products run over.
#[derive(Debug, Clone)]
pub(super) struct NullSpace {
    /// Null-space basis `n x m` (stride `n_dof`), identity on the free columns.
    pub(super) nmat: Vec<f64>,
    /// The non-zeros of `nmat` as `(row, column, value)`, by ascending rows, then columns. Gear
    /// chains make `N` sparse: most dependent speeds follow one free speed, so the per-step
    /// product `N q` runs over this list (in this order, which fixes the rounding); `N^T f`
    /// runs over the dense rows of `nmat` for up to eight free coordinates and over `nzt`
    /// beyond ([`ModeSlot::nt_times`]), to the same sums.
    pub(super) nz: CapVec<(u32, u32, f64)>,
    /// Row `k` of `N` is `nz[nz_row[k]..nz_row[k + 1]]` (`n + 1` offsets).
    pub(super) nz_row: Vec<u32>,
    /// The same non-zeros by columns, `(row, value)` by ascending rows within a column:
    /// column `j` is `nzt[nzt_col[j]..nzt_col[j + 1]]`. `N^T f` sums each of its entries over
    /// this list, in the order a pass over `nz` would add to it, and keeps it in a register.
    pub(super) nzt: CapVec<(u32, f64)>,
    pub(super) nzt_col: Vec<u32>,
    /// Every row of `N` has at most one non-zero (no planetary set or differential ties a
    /// speed to two free ones): `gather[k]` is row `k`'s `(column, value)`, `u32::MAX` for an
    /// empty row.
    pub(super) nz_single: bool,
    pub(super) gather: Vec<(u32, f64)>,
    pub(super) free_cols: Vec<usize>,
}
