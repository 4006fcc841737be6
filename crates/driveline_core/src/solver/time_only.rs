//! The sub-step of a mode whose forces depend on time alone.
//!
//! In many friction modes of a driveline without compliance every applied torque reads the
//! signals only: torque sources, and sliding clutches and brakes whose friction coefficient does
//! not depend on the slip speed (MSL `CoupledClutches` in every one of its modes). The reduced
//! equations of motion are then `Mr q' = N^T f(t)`, and the 2-stage Gauss step is a quadrature:
//!
//! ```text
//! Q_i = q0 + h sum_j a_ij Mr^-1 N^T f(t_j),     q1 = q0 + h sum_j b_j Mr^-1 N^T f(t_j)
//! ```
//!
//! the very values the general path's one linear Newton solve returns, without its machinery.
//! Each force is a magnitude (the law's own torque at that instant) times a fixed direction on
//! the nodes, so the kernel keeps, per force source and per mode, `Mr^-1 N^T d` and the
//! constraint torques `T d` it causes. A sub-step then costs a few dot products per source
//! and sample.
//!
//! The kernel takes a sub-step only when the general path would find nothing to do in it: it
//! evaluates the same event functions at the same samples (slips at the stages and the end,
//! normal forces of the watched elements, every lock's break-away margin) and hands the
//! sub-step back untouched as soon as one of them fires. Results agree with the general path to
//! rounding (the same arithmetic in a different order).

use super::{A, B, Cached, FrictionMode, Simulation, bits, linalg, zero_slip_tolerance};
use crate::elements::{CapacityForm, TimeOnlyKinetic};

/// A force source of a time-only mode.
#[derive(Debug, Clone, Copy)]
pub(super) enum Source {
    /// A law whose force reads the signals only
    /// ([`Law::state_free_nodes`](crate::elements::Law::state_free_nodes)).
    Law(usize),
    /// A sliding friction element with a time-only law: `-tau row` with `tau = dir k(t)`.
    Friction(usize),
}

/// How a source's magnitude is read from the signal values of a sample.
#[derive(Debug, Clone, Copy)]
enum Magnitude {
    /// A law's torque: this signal's value ([`Law::state_free_signal`](crate::elements::Law::state_free_signal)).
    Signal(usize),
    /// A sliding element's kinetic torque in its sliding direction (`dir`, +1 or -1).
    Kinetic { dir: f64, law: TimeOnlyKinetic },
}

impl Magnitude {
    /// The magnitude at the three samples of a sub-step.
    #[inline(always)]
    fn eval3(&self, sig: [&[f64]; 3]) -> [f64; 3] {
        match *self {
            Magnitude::Signal(k) => [sig[0][k], sig[1][k], sig[2][k]],
            Magnitude::Kinetic { dir, law } => {
                let [a, b, c] = law.eval3(sig);
                [dir * a, dir * b, dir * c]
            }
        }
    }
}

/// The time-only kernel of the current mode: its force sources and what a unit of each does.
#[derive(Debug, Clone)]
pub(super) struct TimeOnly {
    /// `(epoch, slot, slot generation)` it was built for.
    tag: Option<(u64, usize, u64)>,
    /// The mode qualifies: every source is time-only, no prescribed rows, no redundant locks.
    active: bool,
    src: Vec<Source>,
    /// Each source's magnitude, as read from the signals.
    mag: Vec<Magnitude>,
    /// Each locked element's constraint-torque row (among the active rows) and capacity.
    locks: Vec<(usize, CapacityForm)>,
    /// The `(m + r) x S` map from the `S` source magnitudes to the reduced accelerations
    /// `Mr^-1 N^T d` (rows `0..m`) and the constraint torques `T d` (rows `m..m + r`),
    /// row-major.
    map: Vec<f64>,
    /// Source magnitudes at the two stages and the end.
    tau: Vec<[f64; 3]>,
    /// One source's column while it is formed (`n` values).
    col: Vec<f64>,
    /// Per friction element, the slip speed at the two stages and the end of the sub-step
    /// (sliding elements only, written by the slip test).
    slips: Vec<[f64; 3]>,
}

impl TimeOnly {
    /// Hints the kernel's tables toward the cache (`Simulation::prefetch`).
    pub(super) fn prefetch(&self) {
        use crate::prefetch::slice;
        if self.active {
            slice(&self.src);
            slice(&self.mag);
            slice(&self.locks);
            slice(&self.map);
            slice(&self.tau);
            slice(&self.col);
            slice(&self.slips);
        }
    }
}

impl TimeOnly {
    /// Room for a network of `n` coordinates, `rmax` active rows, `nl` laws and `nf` friction
    /// elements (built in place afterwards, never grown).
    pub(super) fn new(n: usize, rmax: usize, nl: usize, nf: usize) -> Self {
        let ns = nl + nf;
        Self {
            tag: None,
            active: false,
            src: Vec::with_capacity(ns),
            mag: Vec::with_capacity(ns),
            locks: Vec::with_capacity(nf),
            map: vec![0.0; ns * (n + rmax)],
            tau: vec![[0.0; 3]; ns],
            col: vec![0.0; n],
            slips: vec![[0.0; 3]; nf],
        }
    }
}

impl Simulation {
    /// Whether the network can ever take time-only sub-steps: its laws read the signals only,
    /// no friction law depends on constraint torques, no kinematic clutch prescribes a speed.
    pub(super) fn time_only_network(&self) -> bool {
        self.model.laws_state_free && self.model.torque_dependent == 0 && self.model.net.kinematic.is_empty()
    }

    /// Whether the present mode's applied forces depend on time alone: every law reads the
    /// signals only, and so does every sliding element's kinetic torque.
    pub(super) fn forces_time_only(&self) -> bool {
        self.model.laws_state_free && self.friction.sliding & !self.model.time_only == 0
    }

    /// Builds the kernel of the current mode if it is stale; true when the mode qualifies.
    #[inline]
    fn time_only_ready(&mut self) -> bool {
        let slot = self.cur;
        let tag = (self.epoch, slot, self.slots[slot].generation);
        if self.kernel.tag == Some(tag) {
            return self.kernel.active;
        }
        self.build_time_only(tag)
    }

    /// Builds the kernel of the current mode (`tag`); true when the mode qualifies.
    #[inline(never)]
    fn build_time_only(&mut self, tag: (u64, usize, u64)) -> bool {
        let slot = self.cur;
        self.kernel.tag = Some(tag);
        let s = &self.slots[slot];
        let active = s.rhs.is_empty() && !s.redundant && self.forces_time_only();
        let k = &mut self.kernel;
        k.active = active;
        if !active {
            return false;
        }
        let n = self.model.n_dof;
        let (m, r) = (s.m, s.r);
        k.src.clear();
        k.src.extend((0..self.model.net.laws.len()).map(Source::Law));
        k.src.extend(bits(self.friction.sliding).map(Source::Friction));
        k.mag.clear();
        for src in k.src.iter() {
            k.mag.push(match *src {
                Source::Law(l) => {
                    Magnitude::Signal(self.model.net.laws[l].state_free_signal().expect("a state-free law"))
                }
                Source::Friction(i) => Magnitude::Kinetic {
                    dir: self.modes[i].dir(),
                    law: self.model.net.friction[i].law.time_only_kinetic().expect("a time-only law"),
                },
            });
        }
        let np = self.model.net.rows.len();
        k.locks.clear();
        k.locks.extend(
            s.locked.iter().enumerate().map(|(pos, &i)| (np + pos, self.model.net.friction[i].law.capacity_form())),
        );
        let ns = k.src.len();
        for (j, src) in k.src.iter().enumerate() {
            // The source's force per unit magnitude, as (node, coefficient) pairs; ground nodes
            // (beyond n) carry no coordinate.
            let mut nodes = [(0usize, 0.0f64); 3];
            match *src {
                Source::Law(l) => {
                    let [a, b] = self.model.net.laws[l].state_free_nodes().expect("a state-free law");
                    nodes[..2].copy_from_slice(&[a, b]);
                }
                Source::Friction(i) => {
                    for (d, &(node, c)) in nodes.iter_mut().zip(&self.model.net.friction[i].row.entries) {
                        *d = (node, -c);
                    }
                }
            }
            let nodes = nodes.iter().filter(|e| e.1 != 0.0 && e.0 < n);
            // Mr^-1 N^T d, over N's rows.
            k.col[..m].fill(0.0);
            for &(node, c) in nodes.clone() {
                for &(_, a, na) in &s.basis.nz[s.basis.nz_row[node] as usize..s.basis.nz_row[node + 1] as usize] {
                    k.col[a as usize] += na * c;
                }
            }
            linalg::lu_solve(&s.mr_lu, m, &s.mr_piv, &mut k.col[..m]);
            for a in 0..m {
                k.map[a * ns + j] = k.col[a];
            }
            // T d: the constraint torques this force causes (`tmap` by node columns).
            for l in 0..r {
                k.map[(m + l) * ns + j] = nodes.clone().map(|&(node, c)| s.tmap[node * s.rstride + l] * c).sum();
            }
        }
        true
    }

    /// The general path's integration of a sub-step of size `h` in a time-only mode (the
    /// network qualifies, [`Simulation::time_only_network`]): the stages, the end and the
    /// constraint torques at the three samples, as the one linear Newton solve would give them
    /// (to rounding) but without its factors. Returns false, with nothing written, when the mode
    /// does not qualify. The stage signals must be filled.
    pub(super) fn time_only_integrate(&mut self, h: f64) -> bool {
        if !self.time_only_ready() {
            return false;
        }
        self.time_only_motion(h);
        // The stage angles (the dense output reads them) and the end angles.
        self.stage_angles(h);
        let n = self.model.n_dof;
        let ws = &mut self.ws;
        let sc = &mut *self.sc;
        let (w0, w1) = (&sc.w_st[0][..n], &sc.w_st[1][..n]);
        for (((p, phi), x0), x1) in sc.phi1[..n].iter_mut().zip(&self.phi[..n]).zip(w0).zip(w1) {
            *p = phi + h * (B[0] * x0 + B[1] * x1);
        }
        // The constraint torques at the stages are valid (every row); forces are evaluated on
        // demand.
        ws.cached = Cached::STAGE_TORQUES;
        self.stats.newton_iterations += 1;
        true
    }

    /// The motion over a sub-step of size `h` from the current state in the current (time-only,
    /// built) mode: the source magnitudes at the three samples (`kernel.tau`), the stages
    /// (`ws.q`, `sc.w_st`), the end (`sc.res` reduced, `sc.w1`) and the constraint torques at
    /// the stages and the end (`sc.lam_st`, `ws.lam_end`). The stage signals must be filled.
    #[inline(always)]
    fn time_only_motion(&mut self, h: f64) {
        let n = self.model.n_dof;
        let s = &self.slots[self.cur];
        let (m, r) = (s.m, s.r);
        let k = &mut self.kernel;
        let ns = k.src.len();
        let ws = &mut self.ws;
        let sc = &mut *self.sc;
        // Magnitudes at the samples: each law's own torque, each sliding element's kinetic
        // torque (time-only: read at any slip speed).
        let samples: [&[f64]; 3] = [&ws.sig[0], &ws.sig[1], &ws.sig_end];
        for (mag, tau) in k.mag.iter().zip(k.tau.iter_mut()) {
            *tau = mag.eval3(samples);
        }
        // Each row of the map against the magnitudes at the three samples: reduced
        // accelerations give the stages Q_i = q0 + h sum_j a_ij acc_j and the end
        // q1 = q0 + h sum_j b_j acc_j; constraint-torque rows the torques at the samples.
        // (A few sources: the row length is a constant of the instance, its loops unrolled.)
        let rows = Rows { map: &k.map, tau: &k.tau[..ns], ns, m, r, h };
        let out = (&mut ws.q[..2 * m], &mut sc.res[..m], &mut sc.lam_st, &mut ws.lam_end[..r]);
        match ns {
            1 => rows.apply::<1>(&s.basis.free_cols[..m], &self.w, out),
            2 => rows.apply::<2>(&s.basis.free_cols[..m], &self.w, out),
            3 => rows.apply::<3>(&s.basis.free_cols[..m], &self.w, out),
            4 => rows.apply::<4>(&s.basis.free_cols[..m], &self.w, out),
            _ => rows.apply::<0>(&s.basis.free_cols[..m], &self.w, out),
        }
        let (q0, q1) = ws.q[..2 * m].split_at(m);
        let [w0, w1] = &mut sc.w_st;
        s.n_times3([q0, q1, &sc.res[..m]], [&mut w0[..n], &mut w1[..n], &mut sc.w1[..n]]);
    }

    /// Integrates a sub-step of size `h` with the time-only kernel and commits it when no event
    /// can lie in it. Returns false, with the state untouched and the sub-step's signals left
    /// in place for the general path, when the mode does not qualify or an event function
    /// fires at a sample. The network must qualify ([`Simulation::time_only_network`]).
    pub(super) fn time_only_substep(&mut self, h: f64) -> bool {
        if !self.time_only_ready() {
            return false;
        }
        self.fill_stage_signals(self.t, h);
        self.signals.stages_ready = true;
        self.time_only_motion(h);
        let n = self.model.n_dof;
        // The events the general path would look for, at the same samples.
        // (A slip reverses where `-dir w_rel > 0`, as `Simulation::slip_g` reads it; its three
        // samples in one pass over the row, kept for the end records and the ledger.)
        for i in bits(self.friction.sliding) {
            let g = self.model.net.friction[i].row.dot3([&self.sc.w_st[0], &self.sc.w_st[1], &self.sc.w1]);
            let d = -self.modes[i].dir();
            if d * g[0] > 0.0 || d * g[1] > 0.0 || d * g[2] > 0.0 {
                return false;
            }
            self.kernel.slips[i] = g;
        }
        // An engage (a free element's force turning on) or a release (an engaged one's turning
        // off), as `Simulation::may_trigger` reads them at the three samples.
        let (s0, s1, se) = (&self.ws.sig[0][..], &self.ws.sig[1][..], &self.ws.sig_end[..]);
        for &(i, k) in self.friction.watch_list.iter() {
            let k = k as usize;
            let u = [s0[k], s1[k], se[k]];
            let fires = if self.modes[i as usize] == FrictionMode::Free {
                (u[0] > 0.0) | (u[1] > 0.0) | (u[2] > 0.0)
            } else {
                (-u[0] > 0.0) | (-u[1] > 0.0) | (-u[2] > 0.0)
            };
            if fires {
                return false;
            }
        }
        // Every lock's break-away margin ([`FrictionLaw::hold_excess`]; no law of a time-only
        // network reads constraint torques for its limit).
        let ws = &self.ws;
        let sc = &*self.sc;
        let samples = [(&sc.lam_st[0][..], s0), (&sc.lam_st[1][..], s1), (&ws.lam_end[..], se)];
        for &(row, cap) in self.kernel.locks.iter() {
            for &(lam, sig) in &samples {
                if cap.eval(sig).excess(lam[row]).0 > 0.0 {
                    return false;
                }
            }
        }
        // A non-finite state is the general path's to report: `x * 0` is 0 for a finite `x`
        // and NaN otherwise. The largest speed sets the zero-slip tolerance below.
        let sc = &mut *self.sc;
        let (mut bad, mut w_max) = (0.0, 1.0f64);
        for (((phi1, phi), (w0, w1)), v) in sc.phi1[..n]
            .iter_mut()
            .zip(&self.phi[..n])
            .zip(sc.w_st[0][..n].iter().zip(&sc.w_st[1][..n]))
            .zip(&sc.w1[..n])
        {
            *phi1 = phi + h * (B[0] * w0 + B[1] * w1);
            bad += *phi1 * 0.0 + v * 0.0;
            if v.abs() > w_max {
                w_max = v.abs();
            }
        }
        if bad != 0.0 {
            return false;
        }
        // Nothing happens: commit, as the general path's commit does.
        self.signals.stages_ready = false;
        self.stats.newton_iterations += 1;
        self.stats.time_only_substeps += 1;
        let k = &self.kernel;
        let ws = &mut self.ws;
        let sc = &mut *self.sc;
        // The sliding elements whose slip ends at zero (to rounding), as
        // [`Simulation::slips_at_zero`] finds them at the committed state.
        let tol = zero_slip_tolerance(w_max);
        let mut zero = 0;
        for (src, tau) in k.src.iter().zip(&k.tau) {
            // The end records (the outputs read at a clean step end) and, for the ledger, the
            // work over the sub-step from the powers at the stages.
            match *src {
                Source::Law(l) => {
                    ws.law_tau_end[l] = tau[2];
                    ws.law_diss_end[l] = 0.0;
                    if self.params.track_energy {
                        // A state-free law is a source: its power is input.
                        // (The speed across it summed from -0.0 as `Iterator::sum` sums.)
                        let [(a, ca), (b, cb)] = self.model.net.laws[l].state_free_nodes().expect("a state-free law");
                        let [w0, w1] = &sc.w_st;
                        let p0 = tau[0] * (-0.0 + ca * w0[a] + cb * w0[b]);
                        let p1 = tau[1] * (-0.0 + ca * w1[a] + cb * w1[b]);
                        self.energy.input += h * (B[0] * p0 + B[1] * p1);
                    }
                }
                Source::Friction(i) => {
                    let slips = k.slips[i];
                    let slip = slips[2];
                    ws.fric_tau_end[i] = tau[2];
                    ws.fric_power_end[i] = tau[2] * slip;
                    if slip.abs() <= tol {
                        zero |= 1 << i;
                    }
                    if self.params.track_energy || self.thermal.is_some() {
                        // A sliding element's `tau w_rel` is dissipated (and heats its port).
                        let p = [tau[0] * slips[0], tau[1] * slips[1]];
                        let d = h * (B[0] * p[0] + B[1] * p[1]);
                        self.energy.dissipated += d;
                        if let Some(th) = self.thermal.as_deref_mut() {
                            th.book_friction(i, d);
                        }
                    }
                }
            }
        }
        // The end caches: forces' records (above) and constraint torques are valid.
        ws.cached = Cached::END;
        // The end state becomes the state: the buffers trade places (their ground entries are
        // equal, written once at the start, see `Simulation::start`); nothing reads the end
        // buffers before the next sub-step writes them.
        std::mem::swap(&mut self.phi, &mut sc.phi1);
        std::mem::swap(&mut self.w, &mut sc.w1);
        self.friction.zero_slips = Some(zero);
        self.t += h;
        true
    }
}

/// The map of a time-only mode against the source magnitudes of a sub-step of size `h`.
struct Rows<'a> {
    /// `(m + r) x ns`, row-major.
    map: &'a [f64],
    /// The `ns` magnitudes at the two stages and the end.
    tau: &'a [[f64; 3]],
    ns: usize,
    m: usize,
    r: usize,
    h: f64,
}

impl Rows<'_> {
    /// The stages `q` (`2m`), the reduced end `res` (`m`) and the constraint torques at the
    /// stages and the end, from the start speeds `w` on the free columns. `NS` is the row
    /// length when it is a constant of the caller (0: read `ns`); the sums run in the same
    /// order either way.
    #[inline(always)]
    fn apply<const NS: usize>(
        &self,
        free_cols: &[usize],
        w: &[f64],
        (q, res, lam_st, lam_end): (&mut [f64], &mut [f64], &mut [Vec<f64>; 2], &mut [f64]),
    ) {
        let ns = if NS == 0 { self.ns } else { NS };
        let (m, r, h) = (self.m, self.r, self.h);
        let tau = &self.tau[..ns];
        let (qa, qb) = q[..2 * m].split_at_mut(m);
        if ns == 0 {
            // No sources: nothing accelerates, and no lock carries a torque.
            for (((qa, qb), res), &col) in qa.iter_mut().zip(qb.iter_mut()).zip(&mut res[..m]).zip(&free_cols[..m]) {
                // (`+ 0.0` as the general sum adds it: a -0.0 speed comes out +0.0.)
                let q0 = w[col] + 0.0;
                (*qa, *qb, *res) = (q0, q0, q0);
            }
            let [l0, l1] = lam_st;
            for l in [&mut l0[..r], &mut l1[..r], &mut lam_end[..r]] {
                l.fill(0.0);
            }
            return;
        }
        for ((((qa, qb), res), &col), row) in
            qa.iter_mut().zip(qb.iter_mut()).zip(&mut res[..m]).zip(&free_cols[..m]).zip(self.map.chunks_exact(ns))
        {
            // (The end sample of an acceleration row is not needed: the end follows from the
            // stages.)
            let mut acc = [0.0f64; 2];
            for (c, t) in row.iter().zip(tau) {
                acc[0] += c * t[0];
                acc[1] += c * t[1];
            }
            let q0 = w[col];
            *qa = q0 + h * (A[0][0] * acc[0] + A[0][1] * acc[1]);
            *qb = q0 + h * (A[1][0] * acc[0] + A[1][1] * acc[1]);
            *res = q0 + h * (B[0] * acc[0] + B[1] * acc[1]);
        }
        let [l0, l1] = lam_st;
        for (((l0, l1), le), row) in
            l0[..r].iter_mut().zip(l1[..r].iter_mut()).zip(&mut lam_end[..r]).zip(self.map.chunks_exact(ns).skip(m))
        {
            let mut acc = [0.0f64; 3];
            for (c, t) in row.iter().zip(tau) {
                acc[0] += c * t[0];
                acc[1] += c * t[1];
                acc[2] += c * t[2];
            }
            [*l0, *l1, *le] = acc;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{IntegrationParameters, Scenario, Simulation};

    /// Runs a shipped scenario at 1 ms with and without the kernel; returns the largest speed
    /// difference, the two event lists (element, new mode, time) and the two simulations.
    fn both_ways(file: &str) -> (f64, Vec<(usize, i32, f64)>, Vec<(usize, i32, f64)>, Simulation, Simulation) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/scenarios").join(file);
        let (sc, net) = Scenario::load_network(&path).expect("shipped scenario");
        let mut fast = Simulation::with_parameters(net.clone(), IntegrationParameters::default());
        let mut slow = Simulation::with_parameters(net, IntegrationParameters::default());
        slow.model.laws_state_free = false;
        let (mut ev_fast, mut ev_slow) = (Vec::new(), Vec::new());
        let mut worst: f64 = 0.0;
        for k in 1..=(sc.t_end / 1e-3).round() as usize {
            let t = k as f64 * 1e-3;
            fast.step(t - fast.time()).unwrap();
            slow.step(t - slow.time()).unwrap();
            ev_fast.extend(fast.events().iter().map(|e| (e.element, e.to.code(), e.time)));
            ev_slow.extend(slow.events().iter().map(|e| (e.element, e.to.code(), e.time)));
            for (a, b) in fast.speeds().iter().zip(slow.speeds()) {
                worst = worst.max((a - b).abs());
            }
        }
        (worst, ev_fast, ev_slow, fast, slow)
    }

    /// The kernel and the general path integrate the same motion: every speed within rounding
    /// of the other (the same arithmetic in another order), the same mode changes at the same
    /// instants, ledgers that close. CoupledClutches (three clutches, sines, steps), a one-way
    /// clutch, two clutches in parallel (a redundant lock, which the kernel leaves to the
    /// general path) and a twin break-away.
    #[test]
    fn kernel_and_general_path_agree() {
        for (file, min_kernel_steps) in [
            ("msl/CoupledClutches.ron", 1400),
            ("msl/OneWayClutch.ron", 1),
            ("elements/ParallelClutches.ron", 1),
            ("elements/TwinBreakaway.ron", 1),
        ] {
            let (worst, ev_fast, ev_slow, fast, slow) = both_ways(file);
            assert!(fast.stats().time_only_substeps >= min_kernel_steps, "{file}: {:?}", fast.stats());
            assert_eq!(slow.stats().time_only_substeps, 0);
            // Speeds of order 10 rad/s; rounding of 1e-16 relative per step over a few
            // thousand steps, with the event instants (to 1e-12 s) moving it slightly more.
            assert!(worst < 1e-11, "{file}: speeds differ by {worst}");
            assert_eq!(ev_fast.len(), ev_slow.len(), "{file}");
            for (a, b) in ev_fast.iter().zip(&ev_slow) {
                assert_eq!((a.0, a.1), (b.0, b.1), "{file}");
                // Located to the event tolerance (1e-12 s by default) either way.
                assert!((a.2 - b.2).abs() < 1e-10, "{file}: {a:?} {b:?}");
            }
            let (ef, es) =
                (fast.energy().expect("the energy ledger is on"), slow.energy().expect("the energy ledger is on"));
            assert!((ef.input - es.input).abs() <= 1e-9 * es.scale(), "{file}: {ef:?} {es:?}");
            assert!(ef.residual().abs() <= 1e-9 * ef.scale(), "{file}: {ef:?}");
        }
    }
}
