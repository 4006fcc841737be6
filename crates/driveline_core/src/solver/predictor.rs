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
    /// last sub-step at its stages (`ws.pred_g`) and its end (`N^T f_end`) are extrapolated by
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
            let Work { f_end, pred_ge, .. } = &mut self.ws;
            s.nt_times(f_end, pred_ge);
        }
        if !(jump && self.input_step_forces(slot)) {
            self.ws.gq[..2 * m].fill(0.0);
        }
        let Work { gq, pred_g, pred_ge, .. } = &mut self.ws;
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
    /// `ws.gq` ([`Correction`]) through the inverse Newton matrix of the slot (or the
    /// scratch one).
    pub(super) fn newton_response(&mut self, slot: usize, h: f64, scratch: bool, residual: Residual) {
        let s = &self.slots[slot];
        let Work { gq, res, q, q0, newton_inv, .. } = &mut self.ws;
        let inv = if scratch { &newton_inv[..] } else { &s.newton_inv[..] };
        Correction { residual, h, mr: &s.mr, gq, q0, inv }.apply(s.m, q, res);
    }
}
