//! Accelerations at the end of a step, for the acceleration sensors (MSL `AccSensor`,
//! `RelAccSensor`): `a = N Mr^-1 N^T (f - M ud) + ud` in the mode the step ends in, with `f` the
//! applied forces at the end state (laws, sliding friction) and `ud` the prescribed part of the
//! acceleration. Computed only for networks with an acceleration sensor, in buffers of its own,
//! so that measuring changes nothing the step reads.

use super::*;

/// The buffers of the end accelerations.
#[derive(Debug, Clone)]
pub(super) struct Accelerations {
    /// Accelerations of every node (grounds 0), rad/s^2 (m/s^2).
    pub(super) a: Vec<f64>,
    f: Vec<f64>,
    ud: Vec<f64>,
    g: Vec<f64>,
    scratch: Vec<f64>,
    dep_tau: Vec<f64>,
}

impl Accelerations {
    /// Buffers for `net`, or `None` when it has no acceleration sensor.
    pub(super) fn for_network(net: &Network) -> Option<Box<Self>> {
        use crate::network::Sensor;
        if !net.elements.iter().any(|e| matches!(e.sensor, Some(Sensor::Acc | Sensor::RelAcc))) {
            return None;
        }
        let (nn, n) = (net.nodes.len(), net.n_dof);
        Some(Box::new(Accelerations {
            a: vec![0.0; nn],
            f: vec![0.0; nn],
            ud: vec![0.0; n],
            g: vec![0.0; n],
            scratch: vec![0.0; nn],
            dep_tau: vec![0.0; n.max(net.friction.len())],
        }))
    }
}

impl Simulation {
    /// The end accelerations of the present state and mode (signals in `ws.sig[2]`).
    #[inline(never)]
    pub(super) fn update_accelerations(&mut self) {
        let Some(acc) = self.accel.as_deref_mut() else { return };
        let net = &self.model.net;
        let n = net.n_dof;
        let s = &self.slots[self.cur];
        acc.f.fill(0.0);
        Self::forces(
            net,
            &self.modes,
            self.friction.sliding,
            &self.regimes,
            &self.phi,
            &self.w,
            &self.ws.sig[2],
            &mut acc.f,
            Record::Nothing,
        );
        let dependent = self.model.torque_dependent & self.friction.sliding;
        if dependent != 0 {
            Self::torque_dependent_correct(
                net,
                s,
                &self.modes,
                dependent,
                &self.w,
                &mut acc.f,
                &mut acc.scratch,
                &mut acc.dep_tau,
                None,
            );
        }
        // The prescribed part of the acceleration.
        acc.ud.fill(0.0);
        for (j, &(_, src)) in s.rhs.iter().enumerate() {
            let (_, drho) = src.rate(&self.model.signals, self.t);
            for k in 0..n {
                acc.ud[k] += s.pmat[j * n + k] * drho;
            }
        }
        // Reduced forces, the reduced accelerations, and back.
        let m = s.m;
        for j in 0..m {
            acc.g[j] = (0..n).map(|k| s.basis.nmat[k * n + j] * (acc.f[k] - net.mass[k] * acc.ud[k])).sum();
        }
        if m > 0 {
            linalg::lu_solve(&s.mr_lu, m, &s.mr_piv, &mut acc.g[..m]);
        }
        for k in 0..n {
            acc.a[k] = (0..m).map(|j| s.basis.nmat[k * n + j] * acc.g[j]).sum::<f64>() + acc.ud[k];
        }
    }

    /// An acceleration sensor's reading at the last step end: the acceleration of its flange
    /// (`AccSensor`, rad/s^2) or of `flange_b` relative to `flange_a` (`RelAccSensor`); `None`
    /// for other elements.
    pub fn element_acceleration(&self, element: usize) -> Option<f64> {
        use crate::network::Sensor;
        let acc = self.accel.as_deref()?;
        let info = self.model.net.elements.get(element)?;
        matches!(info.sensor, Some(Sensor::Acc | Sensor::RelAcc)).then(|| info.rel.map(|r| r.dot(&acc.a)))?
    }
}
