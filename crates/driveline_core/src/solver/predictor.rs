//! The stage predictor: where Newton starts after input steps and stiff transients.

use super::*;

impl Simulation {
    /// Moves the predicted stages `ws.q` of a sub-step of size `h` by the linear response to
    /// the input steps recorded since the last step: `dQ = J^-1 h (A (x) N^T) dF`, where `dF_j`
    /// is the change of the stage forces ([`Simulation::input_step_forces`]).
    ///
    /// A controller writes its outputs as values held over each step, so they step at every
    /// step start through a shift (clutch pressures, throttle cuts) and with every pedal move;
    /// the extrapolated guess then misses the stages by what the steps do over a step (about
    /// 1e-2 rad/s through a 1-2 upshift of the 8HP sedan) and Newton needs a third iteration
    /// to reach its tolerance. The guess only changes where Newton starts: the converged stages
    /// are the same to the tolerance.
    pub(super) fn follow_input_steps(&mut self, slot: usize, h: f64, scratch: bool) {
        if self.input_step_forces(slot) {
            self.newton_response(slot, h, scratch, Residual::Forces);
        }
    }

    /// The linearly implicit predictor ([`NewtonStart::Forces`]): the reduced forces of the
    /// last sub-step at its stages (`pred.g`) and its end (`N^T f_end`) are extrapolated by
    /// their quadratic in time to the stages of this sub-step (`r = h / h_last`), the input
    /// steps' changes added, and the extrapolated stages `ws.q` take one Newton correction
    /// with these forces: `Q += J^-1 (h (A (x) I) g - (I (x) Mr) (Q - q0))`.
    ///
    /// With the forces of the solution the correction would land on it; with forces that are
    /// off by `e_g` (the extrapolation error, `O(h^3)`), it lands `J^-1 h A e_g` away: `O(h^4)`
    /// where the motion is smooth, and about `e_g / lambda` in a stiff mode of rate `lambda`,
    /// where the extrapolated speeds miss by the mode's whole curvature.
    pub(super) fn predict_from_forces(&mut self, slot: usize, h: f64, r: f64, scratch: bool, jump: bool) {
        let s = &self.slots[slot];
        let m = s.m;
        {
            let (f_end, pred_ge) = (&self.ws.f_end, &mut self.pred.g_end);
            s.nt_times(f_end, pred_ge);
        }
        if !(jump && self.input_step_forces(slot)) {
            self.ws.stage_g[..2 * m].fill(0.0);
        }
        let (gq, Predictor { g: pred_g, g_end: pred_ge, .. }) = (&mut self.ws.stage_g, &self.pred);
        let (g0, g1, ge) = (&pred_g[..m], &pred_g[m..2 * m], &pred_ge[..m]);
        for (i, gi) in gq[..2 * m].chunks_exact_mut(m.max(1)).enumerate() {
            // The quadratic through the stages (c_1, c_2) and the end (1) of the last sub-step,
            // at this sub-step's stage i, in units of the last sub-step's length.
            let [l0, l1, l2] = lagrange3([C[0], C[1], 1.0], 1.0 + C[i] * r);
            for (((g, a), b), c) in gi.iter_mut().zip(g0).zip(g1).zip(ge) {
                *g += l0 * a + l1 * b + l2 * c;
            }
        }
        self.newton_response(slot, h, scratch, Residual::Full);
    }

    /// Moves the stages `ws.q` by the Newton correction for the reduced stage forces in
    /// `ws.stage_g` ([`Correction`]) through the inverse Newton matrix of the slot (or the
    /// scratch one).
    pub(super) fn newton_response(&mut self, slot: usize, h: f64, scratch: bool, residual: Residual) {
        let s = &self.slots[slot];
        let Work { stage_g: gq, q, q0, .. } = &mut self.ws;
        let Scratch { res, newton_inv, .. } = &mut *self.sc;
        let inv = if scratch { &newton_inv[..] } else { &self.newton.sets[s.newton].newton_inv[..] };
        Correction { residual, h, mr: &s.mr, gq, q0, inv }.apply(s.m, q, res);
    }
}

/// The last committed sub-step, from which the next one's Newton iteration starts, and how
/// the last iterations went.
#[derive(Debug, Clone)]
pub(super) struct Predictor {
    /// The last committed sub-step in reduced coordinates (start `q0`, stages `Q1 Q2`), its
    /// size, slot and epoch: the predictor of the next sub-step's stages.
    pub(super) q0: Vec<f64>,
    pub(super) q: Vec<f64>,
    /// Reduced forces `N^T f` at the two stages of the last committed sub-step (valid when
    /// `g_ok`), and scratch for the reduced force at its end.
    pub(super) g: Vec<f64>,
    pub(super) g_end: Vec<f64>,
    pub(super) g_ok: bool,
    /// The integrated sub-step's Newton iteration left its stage forces in `ws.stage_g`.
    pub(super) stage_g_ok: bool,
    /// The next sub-step starts from forces ([`NewtonStart::Forces`]): switched on when a
    /// first Newton correction misses the tolerance, kept while the force start's first
    /// corrections are above 1 % of it.
    pub(super) force_start: bool,
    /// The integrated sub-step started from forces.
    pub(super) started_from_forces: bool,
    /// Newton's contraction estimate `eta = theta / (1 - theta)` (`theta`: the ratio of two
    /// successive corrections): the error left in an iterate is about `eta` times the
    /// correction that made it. Infinite when unknown.
    pub(super) newton_eta: f64,
    pub(super) h: f64,
    pub(super) slot: usize,
    pub(super) epoch: u64,
}

impl Predictor {
    /// No sub-step to predict from, for `n` coordinates.
    pub(super) fn new(n: usize) -> Self {
        let v = |k: usize| vec![0.0; k];
        Predictor {
            q0: v(n),
            q: v(2 * n),
            g: v(2 * n),
            g_end: v(n),
            g_ok: false,
            h: 0.0,
            slot: usize::MAX,
            epoch: u64::MAX,
            stage_g_ok: false,
            force_start: true,
            started_from_forces: false,
            newton_eta: f64::INFINITY,
        }
    }
}
