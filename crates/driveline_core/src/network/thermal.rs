//! The lumped thermal network (`Modelica.Thermal.HeatTransfer`): heat ports joined into nodes,
//! heat capacities, conductances, fixed temperatures and heat flows, and the dissipative
//! elements whose `lossPower` flows into their `heatPort`.
//!
//! Heat ports are connected like flanges (`("clutch.heatPort", "convection.solid")`), but only
//! to heat ports. The thermal network does not act on the mechanics, except through the
//! temperature-dependent laws (an eddy current brake's nominal speed); the solver integrates it
//! after each step from the heat each element dissipated in the step (see
//! [`crate::Simulation::step`]).

use super::*;
use crate::model::ElementSpec;

/// A node of the thermal network: heat ports joined together, at one temperature.
#[derive(Debug, Clone, PartialEq)]
pub struct ThermalNode {
    /// The ports joined here, as `"element.port"`.
    pub ports: Vec<String>,
    /// Heat capacity of the node, J/K: the sum of its `HeatCapacitor`s (0: the node's
    /// temperature follows its heat balance at once).
    pub capacity: f64,
    /// Temperature held by a `FixedTemperature`, K.
    pub fixed: Option<f64>,
    /// Initial temperature of a node with capacity, K.
    pub t_start: f64,
}

/// A conductance between two thermal nodes, `Q_flow = G (T_a - T_b)` from `a` to `b`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThermalBranch {
    /// The `ThermalConductor` or `Convection` element.
    pub element: usize,
    /// Node of `port_a` (`solid`).
    pub a: usize,
    /// Node of `port_b` (`fluid`).
    pub b: usize,
    /// The conductance: fixed, W/K, or the index of a signal (a convection's `Gc`).
    pub conductance: Conductance,
}

/// How a branch's conductance is given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Conductance {
    /// A constant conductance, W/K.
    Fixed(f64),
    /// A signal's value, W/K (a negative value counts as 0).
    Signal(usize),
}

/// A `FixedHeatFlow`: `q (1 + alpha (T - t_ref))` W into `node`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeatSource {
    /// The element.
    pub element: usize,
    /// Its node.
    pub node: usize,
    /// Heat flow at the reference temperature, W.
    pub q: f64,
    /// Reference temperature, K.
    pub t_ref: f64,
    /// Temperature coefficient, 1/K.
    pub alpha: f64,
}

/// The compiled thermal network of a [`Network`].
#[derive(Debug, Clone, PartialEq)]
pub struct ThermalNetwork {
    /// The nodes.
    pub nodes: Vec<ThermalNode>,
    /// Conductances between nodes.
    pub branches: Vec<ThermalBranch>,
    /// Fixed heat flows.
    pub sources: Vec<HeatSource>,
    /// The dissipative elements with a connected heat port: `(element, node)`.
    pub heated: Vec<(usize, usize)>,
    /// Per element: the node of its heat port (of `port` / `port_a` / `solid` for the thermal
    /// elements), if connected.
    pub element_node: Vec<Option<usize>>,
    /// Temperature-dependent laws: `(node, signal)`: the run-time input signal that carries the
    /// node's temperature into a law (an eddy current brake's).
    pub readers: Vec<(usize, usize)>,
}

impl ThermalNetwork {
    /// Builds the thermal network of `specs` from its heat-port connections. `signals` receives
    /// the convections' conductance signals. `None` when no element has a heat port connected
    /// and there is no thermal element.
    pub(super) fn build(
        specs: &[ElementSpec],
        connections: &[(usize, usize, usize, usize)],
        signals: &mut Vec<Signal>,
    ) -> Result<Option<ThermalNetwork>, BuildError> {
        if connections.is_empty() && !specs.iter().any(|e| e.kind.is_thermal()) {
            return Ok(None);
        }
        // Every heat port numbered, element by element.
        let mut base = Vec::with_capacity(specs.len());
        let mut n = 0;
        for e in specs {
            base.push(n);
            n += e.kind.heat_ports().len();
        }
        let mut parent: Vec<usize> = (0..n).collect();
        fn find(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        let mut connected = vec![false; n];
        for &(ea, pa, eb, pb) in connections {
            let (sa, sb) = (base[ea] + pa, base[eb] + pb);
            connected[sa] = true;
            connected[sb] = true;
            let (ra, rb) = (find(&mut parent, sa), find(&mut parent, sb));
            if ra != rb {
                let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
                parent[hi] = lo;
            }
        }
        // Nodes: the connected sets, and every port of a thermal element (which must be
        // connected).
        let mut node_of_root: HashMap<usize, usize> = HashMap::new();
        let mut nodes: Vec<ThermalNode> = Vec::new();
        let mut slot_node = vec![usize::MAX; n];
        for (i, e) in specs.iter().enumerate() {
            for (k, port) in e.kind.heat_ports().iter().enumerate() {
                let s = base[i] + k;
                if !connected[s] {
                    if e.kind.is_thermal() {
                        return Err(BuildError::DanglingFlange {
                            element: e.name.clone(),
                            flange: port.to_string(),
                            kind: e.kind.type_name(),
                        });
                    }
                    continue;
                }
                let r = find(&mut parent, s);
                let node = *node_of_root.entry(r).or_insert_with(|| {
                    nodes.push(ThermalNode { ports: Vec::new(), capacity: 0.0, fixed: None, t_start: 0.0 });
                    nodes.len() - 1
                });
                nodes[node].ports.push(format!("{}.{port}", e.name));
                slot_node[s] = node;
            }
        }
        let mut net = ThermalNetwork {
            nodes,
            branches: Vec::new(),
            sources: Vec::new(),
            heated: Vec::new(),
            element_node: vec![None; specs.len()],
            readers: Vec::new(),
        };
        for (i, e) in specs.iter().enumerate() {
            let ports = e.kind.heat_ports();
            if ports.is_empty() {
                continue;
            }
            let node = slot_node[base[i]];
            let node = (node != usize::MAX).then_some(node);
            net.element_node[i] = node;
            match &e.kind {
                ElementKind::HeatCapacitor { C, T_start } => {
                    let nd = &mut net.nodes[node.expect("a thermal element's port is connected")];
                    if nd.capacity > 0.0 && nd.t_start != *T_start {
                        return Err(param(
                            &e.name,
                            format!(
                                "`T_start` is {T_start} K, but another heat capacitor joined at {} starts at {} K; \
                                 capacitors joined in one node must start at one temperature",
                                nd.ports.join(" / "),
                                nd.t_start
                            ),
                        ));
                    }
                    nd.capacity += C;
                    nd.t_start = *T_start;
                }
                ElementKind::FixedTemperature { T } => {
                    let nd = &mut net.nodes[node.expect("a thermal element's port is connected")];
                    if let Some(t) = nd.fixed
                        && t != *T
                    {
                        return Err(param(
                            &e.name,
                            format!(
                                "`T` is {T} K, but {} is already held at {t} K by another FixedTemperature",
                                nd.ports.join(" / ")
                            ),
                        ));
                    }
                    nd.fixed = Some(*T);
                }
                ElementKind::FixedHeatFlow { Q_flow, T_ref, alpha } => net.sources.push(HeatSource {
                    element: i,
                    node: node.expect("a thermal element's port is connected"),
                    q: *Q_flow,
                    t_ref: *T_ref,
                    alpha: *alpha,
                }),
                ElementKind::ThermalConductor { G } => net.branches.push(ThermalBranch {
                    element: i,
                    a: slot_node[base[i]],
                    b: slot_node[base[i] + 1],
                    conductance: Conductance::Fixed(*G),
                }),
                ElementKind::Convection { Gc } => {
                    signals.push(Gc.clone());
                    net.branches.push(ThermalBranch {
                        element: i,
                        a: slot_node[base[i]],
                        b: slot_node[base[i] + 1],
                        conductance: Conductance::Signal(signals.len() - 1),
                    })
                }
                _ => {
                    if let Some(nd) = node {
                        net.heated.push((i, nd));
                    }
                }
            }
        }
        net.check_determined()?;
        Ok(Some(net))
    }

    /// Every node's temperature must be determined: each group of nodes joined by branches
    /// needs a heat capacity or a fixed temperature.
    fn check_determined(&self) -> Result<(), BuildError> {
        let n = self.nodes.len();
        let mut group: Vec<usize> = (0..n).collect();
        fn find(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        for b in &self.branches {
            let (ra, rb) = (find(&mut group, b.a), find(&mut group, b.b));
            group[ra.max(rb)] = ra.min(rb);
        }
        let mut anchored = vec![false; n];
        for (k, nd) in self.nodes.iter().enumerate() {
            if nd.capacity > 0.0 || nd.fixed.is_some() {
                let r = find(&mut group, k);
                anchored[r] = true;
            }
        }
        for k in 0..n {
            let r = find(&mut group, k);
            if !anchored[r] {
                return Err(BuildError::ThermalUndetermined(self.nodes[k].ports.join(" / ")));
            }
        }
        Ok(())
    }
}
