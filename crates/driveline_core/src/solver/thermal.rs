//! The thermal network's state and its step, taken after each mechanical step (piece).
//!
//! # What couples the two
//! Each dissipative element with a connected `heatPort` sends its `lossPower` into it. The
//! heat of a step is the element's dissipated energy over the step as the Gauss quadrature of
//! the mechanical step books it (the energy ledger's own sums, per element), so the heat the
//! thermal network receives is the mechanical energy lost, to rounding.
//!
//! The thermal network is linear in its temperatures. A step of length `h` solves it by the
//! implicit Euler rule, `C (T1 - T0) / h = E / h + sum G (T1_j - T1) + Q_fixed(T1)`, with `E` the
//! heat received in the step and the conductances (a convection's `Gc`) read at the step end:
//! unconditionally stable and free of ringing at any step (L-stable), so a stiff pair (a thin
//! plate on a large conductance) is as safe at 60 Hz as at 1 kHz. It conserves heat exactly:
//! what the capacities store plus what flows to fixed temperatures equals what the elements
//! and fixed heat flows put in ([`ThermalLedger`]). Its error is first order, a lag of about
//! `h/2` in the temperature's response (0.05 K at 100 K/s and 1 ms). A node without capacity
//! takes the temperature of its heat balance over the step (the step's mean loss power).
//!
//! A law that reads a temperature (an eddy current brake's nominal speed) reads it through a
//! run-time input the solver sets after each thermal step to the node's temperature and its
//! rate over the step (a first-order hold), so inside the next step the law sees the
//! temperature extrapolated along its slope: a second-order coupling. With no conductance (the
//! MSL `EddyCurrentBrake`, an adiabatic disc) the temperature at each step end is exact to the
//! mechanical energy.

use super::*;
use crate::network::{Conductance, ThermalNetwork};

/// No heat slot.
const NONE: u32 = u32::MAX;

/// The heat booked by the thermal network since the simulation started, J.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThermalLedger {
    /// Heat the dissipative elements sent into their heat ports.
    pub received: f64,
    /// Heat the fixed heat flows put in (negative: drew out).
    pub sourced: f64,
    /// Heat that flowed into the fixed temperatures.
    pub released: f64,
    /// Heat stored in the capacities, `sum C (T - T_start)`.
    pub stored: f64,
}

/// The thermal network's state and workspaces.
#[derive(Debug, Clone)]
pub(super) struct Thermal {
    /// Node temperatures at the last step end, K.
    pub(super) t: Vec<f64>,
    /// Heat each heated element sent into its port in this step so far, J (slot order: the
    /// network's `heated` list).
    pub(super) heat: Vec<f64>,
    /// Per law, per friction element, per kinematic clutch: its heat slot or `NONE`.
    pub(super) law_slot: Vec<u32>,
    pub(super) fric_slot: Vec<u32>,
    pub(super) kin_slot: Vec<u32>,
    /// Heat flow through each branch at the last step end, W (from `a` to `b`).
    pub(super) flow: Vec<f64>,
    /// The ledger, without `stored` (computed when read).
    pub(super) ledger: ThermalLedger,
    /// Each temperature reader's node temperature at the step start, K.
    before: Vec<f64>,
    /// The unknown of each node (`NONE` for fixed temperatures).
    unknown: Vec<u32>,
    /// Workspaces: the matrix, right-hand side and pivots of the implicit step.
    a: Vec<f64>,
    b: Vec<f64>,
    piv: Vec<usize>,
}

impl Thermal {
    /// The state of `th` at its initial temperatures (nodes without capacity at the balance
    /// of no heat; their signals read at `t0` from `signals`).
    pub(super) fn new(net: &Network, signals: &[Signal], th: &ThermalNetwork, t0: f64) -> Self {
        let mut slot_of = vec![NONE; net.elements.len()];
        for (s, &(e, _)) in th.heated.iter().enumerate() {
            slot_of[e] = s as u32;
        }
        let mut unknown = vec![NONE; th.nodes.len()];
        let mut n = 0;
        for (k, nd) in th.nodes.iter().enumerate() {
            if nd.fixed.is_none() {
                unknown[k] = n;
                n += 1;
            }
        }
        let n = n as usize;
        let mut me = Thermal {
            t: th.nodes.iter().map(|nd| nd.fixed.unwrap_or(nd.t_start)).collect(),
            heat: vec![0.0; th.heated.len()],
            law_slot: net.law_element.iter().map(|&e| slot_of[e]).collect(),
            fric_slot: net.friction.iter().map(|f| slot_of[f.element]).collect(),
            kin_slot: net.kinematic.iter().map(|k| slot_of[k.element]).collect(),
            flow: vec![0.0; th.branches.len()],
            ledger: ThermalLedger::default(),
            before: vec![0.0; th.readers.len()],
            unknown,
            a: vec![0.0; n * n],
            b: vec![0.0; n],
            piv: vec![0; n],
        };
        // Nodes without capacity start at their balance (capacities hold their start values).
        if th.nodes.iter().any(|nd| nd.fixed.is_none() && nd.capacity == 0.0) {
            me.solve(th, signals, t0, None);
        }
        me
    }

    /// Takes over the temperatures, flows and ledger of `from` (a simulation of the same
    /// thermal layout whose parameters changed). A node a fixed temperature holds keeps the new
    /// one.
    pub(super) fn keep_state(&mut self, from: &Thermal) {
        for (k, t) in self.t.iter_mut().enumerate() {
            if self.unknown[k] != NONE {
                *t = from.t[k];
            }
        }
        self.flow.copy_from_slice(&from.flow);
        self.ledger = from.ledger;
    }

    /// Books heat `d` (J) dissipated by law `k`.
    #[inline]
    pub(super) fn book_law(&mut self, k: usize, d: f64) {
        if let Some(&s) = self.law_slot.get(k).filter(|&&s| s != NONE) {
            self.heat[s as usize] += d;
        }
    }

    /// Books heat `d` (J) dissipated by friction element `i`.
    #[inline]
    pub(super) fn book_friction(&mut self, i: usize, d: f64) {
        if let Some(&s) = self.fric_slot.get(i).filter(|&&s| s != NONE) {
            self.heat[s as usize] += d;
        }
    }

    /// Books heat `d` (J) dissipated by kinematic clutch `j` while it engages.
    pub(super) fn book_kinematic(&mut self, j: usize, d: f64) {
        if let Some(&s) = self.kin_slot.get(j).filter(|&&s| s != NONE) {
            self.heat[s as usize] += d;
        }
    }

    /// The conductance of branch `b` at time `t`, W/K.
    fn conductance(b: &crate::network::ThermalBranch, signals: &[Signal], t: f64) -> f64 {
        match b.conductance {
            Conductance::Fixed(g) => g,
            Conductance::Signal(k) => signals[k].eval(t).max(0.0),
        }
    }

    /// Solves the network for the temperatures at `t`: a step of `h` from the present ones with
    /// the heat received (`Some(h)`), or, for the nodes without capacity only, the balance with
    /// no heat (`None`: the capacities stay). False (temperatures kept) when the matrix is
    /// singular (a node whose only conductances read zero) or the result is not finite.
    fn solve(&mut self, th: &ThermalNetwork, signals: &[Signal], t: f64, h: Option<f64>) -> bool {
        let n = self.b.len();
        self.a.fill(0.0);
        self.b.fill(0.0);
        let (a, b, u) = (&mut self.a, &mut self.b, &self.unknown);
        for (k, nd) in th.nodes.iter().enumerate() {
            let i = u[k];
            if i == NONE {
                continue;
            }
            let i = i as usize;
            match h {
                Some(h) => {
                    a[i * n + i] += nd.capacity / h;
                    b[i] += nd.capacity / h * self.t[k];
                }
                // A capacity holds its temperature.
                None if nd.capacity > 0.0 => {
                    a[i * n + i] = 1.0;
                    b[i] = self.t[k];
                }
                None => {}
            }
        }
        let held = |k: usize| h.is_none() && th.nodes[k].capacity > 0.0;
        if let Some(h) = h {
            for (s, &(_, node)) in th.heated.iter().enumerate() {
                if u[node] != NONE {
                    b[u[node] as usize] += self.heat[s] / h;
                }
            }
        }
        for br in &th.branches {
            let g = Self::conductance(br, signals, t);
            for (p, q) in [(br.a, br.b), (br.b, br.a)] {
                if u[p] == NONE || held(p) {
                    continue;
                }
                let i = u[p] as usize;
                a[i * n + i] += g;
                if u[q] == NONE {
                    b[i] += g * self.t[q];
                } else {
                    a[i * n + u[q] as usize] -= g;
                }
            }
        }
        for src in &th.sources {
            if u[src.node] == NONE || held(src.node) {
                continue;
            }
            let i = u[src.node] as usize;
            b[i] += src.q * (1.0 - src.alpha * src.t_ref);
            a[i * n + i] -= src.q * src.alpha;
        }
        if crate::linalg::lu_factor(a, n, &mut self.piv).is_err() {
            return false;
        }
        crate::linalg::lu_solve(a, n, &self.piv, b);
        if !b.iter().all(|x| x.is_finite()) {
            return false;
        }
        for (k, &i) in u.iter().enumerate() {
            if i != NONE {
                self.t[k] = b[i as usize];
            }
        }
        true
    }
}

impl Simulation {
    /// Books the heat of the committed sub-step of `h` to the heat ports: each dissipative law's
    /// and sliding friction element's dissipation, by the ledger's quadrature.
    #[inline(never)]
    pub(super) fn book_heat(&mut self, h: f64) {
        let Some(th) = self.thermal.as_deref_mut() else { return };
        for (k, law) in self.model.net.laws.iter().enumerate() {
            if !matches!(
                law,
                Law::Source { .. }
                    | Law::Feedback { .. }
                    | Law::Quadratic { .. }
                    | Law::SpeedTorque { .. }
                    | Law::Engine { .. }
            ) {
                th.book_law(k, h * (B[0] * self.sc.law_diss[0][k] + B[1] * self.sc.law_diss[1][k]));
            }
        }
        for i in bits(self.friction.sliding) {
            th.book_friction(i, h * (B[0] * self.sc.fric_power[0][i] + B[1] * self.sc.fric_power[1][i]));
        }
    }

    /// The thermal step after a mechanical step (piece) of `h` that ended at `self.t`.
    #[inline(never)]
    pub(super) fn thermal_step(&mut self, h: f64) {
        let Some(th) = self.thermal.as_deref_mut() else { return };
        let net = self.model.net.thermal.as_ref().expect("a thermal network");
        let received: f64 = th.heat.iter().sum();
        for (r, &(node, _)) in net.readers.iter().enumerate() {
            th.before[r] = th.t[node];
        }
        if th.solve(net, &self.model.signals, self.t, Some(h)) {
            th.ledger.received += received;
            // What flowed into the fixed temperatures: through the branches, from the elements
            // and fixed heat flows joined to them directly.
            let mut released = 0.0;
            for (k, br) in net.branches.iter().enumerate() {
                let g = Thermal::conductance(br, &self.model.signals, self.t);
                let q = g * (th.t[br.a] - th.t[br.b]);
                th.flow[k] = q;
                if net.nodes[br.b].fixed.is_some() {
                    released += q * h;
                }
                if net.nodes[br.a].fixed.is_some() {
                    released -= q * h;
                }
            }
            for (s, &(_, node)) in net.heated.iter().enumerate() {
                if net.nodes[node].fixed.is_some() {
                    released += th.heat[s];
                }
            }
            for src in &net.sources {
                let q = src.q * (1.0 + src.alpha * (th.t[src.node] - src.t_ref)) * h;
                th.ledger.sourced += q;
                if net.nodes[src.node].fixed.is_some() {
                    released += q;
                }
            }
            th.ledger.released += released;
        }
        th.heat.fill(0.0);
        for r in 0..net.readers.len() {
            let (node, signal) = self.model.net.thermal.as_ref().expect("a thermal network").readers[r];
            let th = self.thermal.as_deref().expect("a thermal state");
            let (t1, rate) = (th.t[node], (th.t[node] - th.before[r]) / h);
            // (A temperature is finite and far inside the input limits.)
            let _ = self.set_input_ramp_id(InputId::of_signal(signal), t1, rate);
        }
    }

    /// The heat received in a failed step piece is not booked.
    pub(super) fn thermal_discard(&mut self) {
        if let Some(th) = self.thermal.as_deref_mut() {
            th.heat.fill(0.0);
        }
    }

    /// Sets the temperature inputs of the laws that read one to their node's temperature now,
    /// changing at the node's rate now (`with_rate`: from the losses of the last step end, the
    /// flows through the branches and the fixed heat flows; else held).
    pub(super) fn thermal_inputs_now(&mut self, with_rate: bool) {
        let Some(net) = self.model.net.thermal.as_ref() else { return };
        for r in 0..net.readers.len() {
            let net = self.model.net.thermal.as_ref().expect("a thermal network");
            let (node, signal) = net.readers[r];
            let th = self.thermal.as_deref().expect("a thermal state");
            let cap = net.nodes[node].capacity;
            let rate = if with_rate && cap > 0.0 && net.nodes[node].fixed.is_none() {
                let mut q: f64 = net.heated.iter().filter(|h| h.1 == node).map(|h| self.out_power[h.0]).sum();
                for br in &net.branches {
                    let g = Thermal::conductance(br, &self.model.signals, self.t) * (th.t[br.a] - th.t[br.b]);
                    q += if br.b == node { g } else { 0.0 } - if br.a == node { g } else { 0.0 };
                }
                for src in net.sources.iter().filter(|s| s.node == node) {
                    q += src.q * (1.0 + src.alpha * (th.t[node] - src.t_ref));
                }
                q / cap
            } else {
                0.0
            };
            let t = th.t[node];
            let _ = self.set_input_ramp_id(InputId::of_signal(signal), t, rate);
        }
    }

    /// The temperature of a thermal element's port (`HeatCapacitor`, `FixedTemperature`, the
    /// `port_a` / `solid` side of a conductor or convection) or of a dissipative element's
    /// connected `heatPort`, K. `None` for other elements.
    pub fn element_temperature(&self, element: usize) -> Option<f64> {
        let th = self.thermal.as_deref()?;
        let node = (*self.model.net.thermal.as_ref()?.element_node.get(element)?)?;
        Some(th.t[node])
    }

    /// The heat flow through a `ThermalConductor` or `Convection` at the last step end, W
    /// (from `port_a` / `solid` to `port_b` / `fluid`). `None` for other elements.
    pub fn element_heat_flow(&self, element: usize) -> Option<f64> {
        let th = self.thermal.as_deref()?;
        let net = self.model.net.thermal.as_ref()?;
        let k = net.branches.iter().position(|b| b.element == element)?;
        Some(th.flow[k])
    }

    /// The thermal network's heat ledger since the start, or `None` without a thermal network.
    /// `stored + released = received + sourced` to rounding.
    pub fn thermal_ledger(&self) -> Option<ThermalLedger> {
        let th = self.thermal.as_deref()?;
        let net = self.model.net.thermal.as_ref()?;
        let stored = net.nodes.iter().zip(&th.t).map(|(nd, t)| nd.capacity * (t - nd.t_start)).sum();
        Some(ThermalLedger { stored, ..th.ledger })
    }
}
