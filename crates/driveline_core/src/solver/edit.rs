//! Edits between steps: new parameters for a network of the same structure
//! ([`Simulation::update_parameters`]) and written state ([`Simulation::write_state`]).
//!
//! Both keep the clock, the run-time inputs and the friction modes, and leave a state the
//! current mode's constraints hold exactly: speeds are projected onto the rigid connections and
//! locks (mass-weighted, as an impact would), and the modes are selected again at once (a lock
//! past its new limit breaks away, a slip that changed sign slides the other way). The energy
//! ledger starts over: the edit put energy in or took it out from outside the network.

use super::*;
use crate::model::NetworkSpec;

/// Why [`Simulation::update_parameters`] refused an update. The simulation is unchanged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UpdateError {
    /// A parameter is invalid (the message names the element and the parameter).
    #[error(transparent)]
    Build(#[from] crate::network::BuildError),
    /// The update changes what the solver is built of (elements, connections, the constraint
    /// pattern, which elements can lock, which signals there are); build a new simulation
    /// instead (from the present state, see [`crate::ElementKind::set_start_state`]).
    #[error("the change is structural ({0}); it needs a rebuild")]
    Structure(String),
}

/// A write of a body's state (an Inertia's angle and speed, a Mass's position and velocity).
/// `None` keeps the value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateWrite {
    /// Element index of the Inertia or Mass.
    pub element: usize,
    /// New angle, rad (position, m, for a Mass).
    pub angle: Option<f64>,
    /// New speed, rad/s (velocity, m/s, for a Mass).
    pub speed: Option<f64>,
}

/// Why [`Simulation::write_state`] refused a write. Nothing was written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StateWriteError {
    /// The element has no state of its own (it is not an Inertia or a Mass).
    #[error("'{0}' is not an Inertia or a Mass; only bodies have a state to write")]
    NotABody(String),
    /// The element index is past the network's elements.
    #[error("no element {0} in this network")]
    NoSuchElement(usize),
    /// A written value is NaN or infinite.
    #[error("'{element}': the written {what} is {value}; it must be finite")]
    NotFinite {
        /// Element name.
        element: String,
        /// "angle" or "speed".
        what: &'static str,
        /// The value.
        value: f64,
    },
}

/// A written value the state could not take as written, because a rigid connection, a lock or
/// a prescribed motion (or another write) ties it: what was written and what the state holds.
#[derive(Debug, Clone, PartialEq)]
pub struct StateAdjustment {
    /// Element index of the body.
    pub element: usize,
    /// "angle" or "speed".
    pub what: &'static str,
    /// The value written.
    pub written: f64,
    /// The value the state starts from.
    pub kept: f64,
}

/// What the bodies not written follow in [`Simulation::write_state_following`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Follow {
    /// The rigid connections, locks and prescribed motions of the present mode only.
    #[default]
    Rigid,
    /// Those, and the elastic couplings that carry torque now at zero relative speed.
    Elastic,
}

/// Relative tolerance under which a written value counts as taken as written.
const WRITE_TOL: f64 = 1e-9;

impl Simulation {
    /// Applies new parameters in place: `spec` must describe the same network as the one this
    /// simulation runs (the same elements, kinds and connections) with other parameter values:
    /// an inertia, a gear ratio, a spring rate, a clutch's friction table or normal force, an
    /// engine's torque map... The clock, the state (angles, speeds, friction modes, backlash
    /// contacts) and the run-time inputs are kept (a signal left as it was keeps its present
    /// input values); start values in `spec` are ignored. The speeds are projected onto the
    /// constraints under the new parameters (a changed gear ratio moves the speeds behind the
    /// gear as an impact would, mass-weighted), and the friction modes are selected again:
    /// a lock whose new limit is below its torque breaks away in the next step.
    ///
    /// Refused, with the simulation unchanged, for an invalid parameter or a structural change.
    pub fn update_parameters(&mut self, spec: &NetworkSpec) -> Result<(), UpdateError> {
        let mut net = Network::build_uninitialised(spec)?;
        if let Some(why) = self.model.net.structure_difference(&net) {
            return Err(UpdateError::Structure(why));
        }
        for (new, old) in net.signals.iter_mut().zip(&self.model.signals) {
            if new.without_input_values() == old.without_input_values() {
                *new = old.clone();
            }
        }
        let mut next = Simulation::starting_at(net, self.params, self.t);
        let n = self.model.n_dof;
        next.phi[..n].copy_from_slice(&self.phi[..n]);
        next.w[..n].copy_from_slice(&self.w[..n]);
        next.modes.copy_from_slice(&self.modes);
        next.regimes.copy_from_slice(&self.regimes);
        next.kin_engaged.copy_from_slice(&self.kin_engaged);
        next.kin_modes.copy_from_slice(&self.kin_modes);
        next.stats = self.stats;
        if let (Some(to), Some(from)) = (next.thermal.as_deref_mut(), self.thermal.as_deref()) {
            to.keep_state(from);
        }
        next.thermal_inputs_now(false);
        next.settle();
        *self = next;
        Ok(())
    }

    /// Writes bodies' angles and speeds; the next step starts from them. Returns the written
    /// values the state could not take as written (empty when every write holds). The same as
    /// [`Simulation::write_state_following`] with [`Follow::Rigid`].
    pub fn write_state(&mut self, writes: &[StateWrite]) -> Result<Vec<StateAdjustment>, StateWriteError> {
        self.write_state_following(writes, Follow::Rigid)
    }

    /// Writes bodies' angles and speeds; the next step starts from them. Returns the written
    /// values the state could not take as written (empty when every write holds).
    ///
    /// # How a write that conflicts is resolved
    /// The state after a write is the one nearest to the state as written, in the kinetic
    /// energy metric (`sum J_k (w_k - w_written_k)^2`, the same for angles), among those the
    /// present mode allows: the rigid connections (gears, planetary sets), the locked friction
    /// elements and the prescribed motions hold. The written values are kept where the mode
    /// allows it (to rounding); the bodies not written move with them as little as possible (a
    /// write of a wheel's speed behind a locked clutch and a gear moves the engine with it).
    /// Writes are taken in the order given: one that contradicts those before it through a
    /// rigid connection or a lock (two locked bodies written different speeds), or a
    /// prescribed motion, is not taken as written, and is reported. With [`Follow::Elastic`],
    /// the speeds across the elastic couplings that carry torque now (springs, dampers,
    /// backlash, engaged dogs, elastic clutches with a limit) are also made equal where the
    /// writes allow, after the writes and before the nearness: a teleported driveline is at
    /// rest relative to itself. The friction modes are then selected again as after an event.
    pub fn write_state_following(
        &mut self,
        writes: &[StateWrite],
        follow: Follow,
    ) -> Result<Vec<StateAdjustment>, StateWriteError> {
        let took = self.take_scratch();
        let written = self.write_state_leased(writes, follow);
        self.give_back_scratch(took);
        written
    }

    /// [`Simulation::write_state_following`] with the thread's scratch borrowed.
    fn write_state_leased(
        &mut self,
        writes: &[StateWrite],
        follow: Follow,
    ) -> Result<Vec<StateAdjustment>, StateWriteError> {
        let mut speed = Vec::new();
        let mut angle = Vec::new();
        for w in writes {
            let info = self.model.net.elements.get(w.element).ok_or(StateWriteError::NoSuchElement(w.element))?;
            let Some(node) = self.model.out_body[w.element] else {
                return Err(StateWriteError::NotABody(info.name.clone()));
            };
            for (what, v, list) in [("angle", w.angle, &mut angle), ("speed", w.speed, &mut speed)] {
                let Some(v) = v else { continue };
                if !v.is_finite() {
                    return Err(StateWriteError::NotFinite { element: info.name.clone(), what, value: v });
                }
                list.push((w.element, node as usize, v));
            }
        }
        if speed.is_empty() && angle.is_empty() {
            return Ok(Vec::new());
        }
        let n = self.model.n_dof;
        let unit = |k: usize| {
            let mut e = vec![0.0; n];
            if k < n {
                e[k] = 1.0;
            }
            e
        };
        let mut report = Vec::new();
        if !speed.is_empty() {
            self.prescribed(self.t, 3);
            let mut base = vec![0.0; self.w.len()];
            if !self.slots[self.cur].rhs.is_empty() {
                base.copy_from_slice(&self.ws.presc_speed[3]);
            }
            let mut target: Vec<f64> = self.w.clone();
            for &(_, k, v) in &speed {
                target[k] = v;
            }
            let mut rows: Vec<(Vec<f64>, f64)> = speed.iter().map(|&(_, k, v)| (unit(k), v)).collect();
            if follow == Follow::Elastic {
                self.fill_signals(2, self.t, false);
                for law in &self.model.net.laws {
                    if let Some((a, b)) = law.elastic_tie(&self.ws.sig[2]) {
                        let mut r = vec![0.0; n];
                        let (mut value, mut any) = (0.0, false);
                        for (k, c) in [(b, 1.0), (a, -1.0)] {
                            if k < n {
                                r[k] += c;
                                any = true;
                            } else {
                                value -= c * self.w[k];
                            }
                        }
                        if any {
                            rows.push((r, value));
                        }
                    }
                }
            }
            let out = self.nearest_consistent(&target, &base, &rows);
            self.w[..n].copy_from_slice(&out[..n]);
            report.extend(adjustments(&speed, &self.w, "speed"));
        }
        if !angle.is_empty() {
            // Angles move by the smallest mass-weighted displacement that keeps every
            // constraint's present offset.
            let mut delta = vec![0.0; self.phi.len()];
            for &(_, k, v) in &angle {
                delta[k] = v - self.phi[k];
            }
            let rows: Vec<(Vec<f64>, f64)> = angle.iter().map(|&(_, k, v)| (unit(k), v - self.phi[k])).collect();
            let zero = vec![0.0; self.phi.len()];
            let out = self.nearest_consistent(&delta, &zero, &rows);
            for k in 0..n {
                self.phi[k] += out[k];
            }
            report.extend(adjustments(&angle, &self.phi, "angle"));
        }
        self.settle();
        Ok(report)
    }

    /// The consistent speeds (`w = N q + base`, `N` the present mode's null space) nearest to
    /// `target` in the mass metric, holding each row `(c, v)`, `c . w = v` (`c` over the free
    /// coordinates), that is independent of those before it. Returns the full node vector.
    fn nearest_consistent(&mut self, target: &[f64], base: &[f64], wanted: &[(Vec<f64>, f64)]) -> Vec<f64> {
        let n = self.model.n_dof;
        let s = &self.slots[self.cur];
        let m = s.m;
        let nmat = |k: usize, a: usize| s.basis.nmat[k * n + a];
        let mass = &self.model.net.mass;
        // q0 = Mr^-1 N^T M (target - base): the projection of the target.
        let mut q0: Vec<f64> =
            (0..m).map(|a| (0..n).map(|k| nmat(k, a) * mass[k] * (target[k] - base[k])).sum()).collect();
        if m > 0 {
            linalg::lu_solve(&s.mr_lu, m, &s.mr_piv, &mut q0);
        }
        // The rows in the reduced coordinates, A q = t, kept where independent of the rows
        // before (Gram-Schmidt).
        let mut rows: Vec<Vec<f64>> = Vec::new();
        let mut ortho: Vec<Vec<f64>> = Vec::new();
        let mut rhs: Vec<f64> = Vec::new();
        for (c, v) in wanted {
            let a: Vec<f64> = (0..m).map(|j| (0..n).map(|k| c[k] * nmat(k, j)).sum()).collect();
            let mut r = a.clone();
            for o in &ortho {
                let d = linalg::dot(&r, o);
                for j in 0..m {
                    r[j] -= d * o[j];
                }
            }
            let norm = linalg::dot(&r, &r).sqrt();
            let scale = (0..n).map(|k| c[k].abs()).fold(0.0, f64::max);
            if norm > 1e-10 * scale.max(1e-300) {
                ortho.push(r.iter().map(|x| x / norm).collect());
                rhs.push(v - linalg::dot(c, &base[..n]));
                rows.push(a);
            }
        }
        let p = rows.len();
        let mut q = q0.clone();
        if p > 0 && m > 0 {
            // q = q0 + Mr^-1 A^T mu, (A Mr^-1 A^T) mu = t - A q0.
            let mut minv_at = vec![0.0; p * m];
            for (i, a) in rows.iter().enumerate() {
                let col = &mut minv_at[i * m..(i + 1) * m];
                col.copy_from_slice(a);
                linalg::lu_solve(&s.mr_lu, m, &s.mr_piv, col);
            }
            let mut sys = vec![0.0; p * p];
            for i in 0..p {
                for j in 0..p {
                    sys[i * p + j] = linalg::dot(&rows[i], &minv_at[j * m..(j + 1) * m]);
                }
            }
            let mut mu: Vec<f64> = (0..p).map(|i| rhs[i] - linalg::dot(&rows[i], &q0)).collect();
            let mut piv = vec![0; p];
            if linalg::lu_factor(&mut sys, p, &mut piv).is_ok() {
                linalg::lu_solve(&sys, p, &piv, &mut mu);
                for i in 0..p {
                    for j in 0..m {
                        q[j] += minv_at[i * m + j] * mu[i];
                    }
                }
            }
        }
        let mut out = target.to_vec();
        for k in 0..n {
            out[k] = (0..m).map(|j| nmat(k, j) * q[j]).sum::<f64>() + base[k];
        }
        out
    }

    /// After an edit: the present mode compiled, the speeds on its constraints, the modes
    /// selected again, a fresh ledger and outputs. The edit is not a mode event of a step.
    fn settle(&mut self) {
        let took = self.take_scratch();
        self.settle_leased();
        self.give_back_scratch(took);
    }

    /// [`Simulation::settle`] with the thread's scratch borrowed.
    fn settle_leased(&mut self) {
        let key = Self::lock_key(&self.modes, &self.kin_engaged);
        self.cur = self.slot_for(key);
        self.fill_signals(2, self.t, false);
        self.project();
        self.select_modes(0, false);
        self.friction.sliding = sliding_mask(&self.modes);
        self.events.clear();
        self.restart_ledger();
        self.update_outputs();
    }
}

/// The written values (`(element, node, value)`) that `state` does not hold to [`WRITE_TOL`].
fn adjustments(written: &[(usize, usize, f64)], state: &[f64], what: &'static str) -> Vec<StateAdjustment> {
    let mut out: Vec<StateAdjustment> = Vec::new();
    for (i, &(element, k, v)) in written.iter().enumerate() {
        // A later write to the same body replaces an earlier one.
        if written[i + 1..].iter().any(|w| w.1 == k) {
            continue;
        }
        if (state[k] - v).abs() > WRITE_TOL * v.abs().max(1.0) {
            out.push(StateAdjustment { element, what, written: v, kept: state[k] });
        }
    }
    out
}
