//! Network assembly: flanges joined into nodes, elements compiled into laws, constraint rows and
//! friction rows, checked once so that the solver never meets a singular problem.

use crate::Signal;
use crate::elements::{FrictionElement, FrictionLaw, Law, LossTable, Row};
use crate::linalg;
use crate::model::{Domain, ElementKind, NetworkSpec, Requirement};
use std::collections::HashMap;

mod assemble;
mod thermal;
mod validate;

pub use thermal::{Conductance, HeatSource, ThermalBranch, ThermalNetwork, ThermalNode};

use validate::param;
pub use validate::validate_element;

/// Why a network cannot be built. Messages say what is wrong and what is allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    /// Two elements share a name.
    #[error("element name '{0}' is used twice; names must be unique")]
    DuplicateName(String),
    /// A connection names an element that does not exist.
    #[error("connection names '{flange}', but there is no element '{element}'")]
    UnknownElement {
        /// The flange reference as written.
        flange: String,
        /// The element part of it.
        element: String,
    },
    /// A connection names a flange the element does not have.
    #[error("'{element}' ({kind}) has no flange '{flange}'; its flanges are: {allowed}")]
    UnknownFlange {
        /// Element name.
        element: String,
        /// Element type.
        kind: &'static str,
        /// The flange asked for.
        flange: String,
        /// Flanges it has.
        allowed: String,
    },
    /// A flange reference is not of the form `element.flange`.
    #[error("'{0}' is not a flange reference; write \"element.flange\", e.g. \"J1.flange_a\"")]
    BadFlangeRef(String),
    /// Rotational joined to translational.
    #[error("connection '{a}' - '{b}' joins a rotational to a translational flange")]
    DomainMismatch {
        /// First flange.
        a: String,
        /// Second flange.
        b: String,
    },
    /// A required flange is open.
    #[error("flange '{element}.{flange}' is not connected; a {kind} needs it connected")]
    DanglingFlange {
        /// Element name.
        element: String,
        /// Flange name.
        flange: String,
        /// Element type.
        kind: &'static str,
    },
    /// Support connected while `use_support = false`, or open while true.
    #[error("'{element}.support' is {state}, but use_support = {use_support}; set use_support = {fix}")]
    SupportMismatch {
        /// Element name.
        element: String,
        /// "connected" or "not connected".
        state: &'static str,
        /// The flag as given.
        use_support: bool,
        /// The flag that would match.
        fix: bool,
    },
    /// A heat port joined to a flange.
    #[error("connection '{a}' - '{b}' joins a heat port to a flange; heat ports connect only to heat ports")]
    HeatPortMismatch {
        /// First end.
        a: String,
        /// Second end.
        b: String,
    },
    /// Thermal nodes whose temperature nothing determines.
    #[error(
        "the heat ports {0} have no heat capacity and no conductance to one or to a fixed temperature; connect a HeatCapacitor or a FixedTemperature there"
    )]
    ThermalUndetermined(String),
    /// An element with no connection at all.
    #[error("element '{0}' is not connected to anything; connect it or remove it")]
    Disconnected(String),
    /// A parameter is out of range.
    #[error("'{element}': {message}")]
    Parameter {
        /// Element name.
        element: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// Two `Fixed` elements at different angles are joined.
    #[error("flanges fixed at different angles are joined through '{0}'")]
    ConflictingFixed(String),
    /// Rigid constraints that repeat or contradict each other.
    #[error("over-constrained: {0}")]
    OverConstrained(String),
    /// A node with no inertia whose motion nothing determines.
    #[error(
        "the junction of {0} has no inertia and no kinematic constraint determines its motion; connect an Inertia (J > 0) there"
    )]
    Massless(String),
    /// More friction elements than the mode bitset holds.
    #[error("{0} friction and kinematic clutch elements in one network; at most 64 are supported")]
    TooManyFriction(usize),
    /// Initial values are missing.
    #[error("missing initial value: the {what} of {nodes} is not determined; give {hint}")]
    MissingInitial {
        /// "angle" or "speed".
        what: &'static str,
        /// The undetermined nodes.
        nodes: String,
        /// What to add.
        hint: &'static str,
    },
    /// Initial values contradict each other.
    #[error(
        "conflicting initial values: the given {what} values (and gear/planetary kinematics) contradict each other near {near}"
    )]
    ConflictingInitial {
        /// "angle" or "speed".
        what: &'static str,
        /// Where.
        near: String,
    },
    /// A signal is invalid.
    #[error("'{element}': signal: {message}")]
    Signal {
        /// Element name.
        element: String,
        /// What is wrong.
        message: String,
    },
}

/// What kind of node: a free coordinate or a ground.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Flanges joined here, as `element.flange`.
    pub flanges: Vec<String>,
    /// Inertia (kg m^2) or mass (kg) lumped on the node.
    pub inertia: f64,
    /// Domain.
    pub domain: Domain,
}

/// What a prescribed permanent row imposes (the signal index inside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prescribed {
    /// `row . w = signal(t)`.
    Speed(usize),
    /// `row . phi = signal(t)`, imposed as `row . w = signal'(t)` from consistent start values.
    Position(usize),
    /// `row . phi = offset` (a constant, the signal's value), `row . w = 0`: a rigid joint
    /// with an angle offset (MSL `Disc`).
    Offset(usize),
    /// `row . phi = phi(t)` with its speed and acceleration given as signals of their own (MSL
    /// `Move`): imposed as `row . w = w(t)` (rate `a(t)`), starting at `phi(0)`, `w(0)`.
    Move {
        /// Angle signal.
        phi: usize,
        /// Speed signal.
        w: usize,
        /// Acceleration signal.
        a: usize,
    },
}

impl Prescribed {
    /// `(rho, rho')` of the row at `t`: the prescribed relative speed and its rate.
    pub fn rate(&self, signals: &[Signal], t: f64) -> (f64, f64) {
        match *self {
            Prescribed::Speed(k) => (signals[k].eval(t), signals[k].derivative(t)),
            Prescribed::Position(k) => (signals[k].derivative(t), signals[k].second_derivative(t)),
            Prescribed::Move { w, a, .. } => (signals[w].eval(t), signals[a].eval(t)),
            Prescribed::Offset(_) => (0.0, 0.0),
        }
    }
}

/// A kinematic clutch as the solver sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct KinematicElement {
    /// Index of the element in the network's element list.
    pub element: usize,
    /// `w_rel = row . w`.
    pub row: Row,
    /// Index of the command signal.
    pub command: usize,
    /// Engagement / release duration, s.
    pub shift_time: f64,
    /// Signal holding the prescribed relative speed while engaging (rewritten at run time).
    pub rho_signal: usize,
    /// Signal holding the release torque ramp while disengaging (rewritten at run time).
    pub tau_signal: usize,
}

/// Per-element bookkeeping for telemetry and initial values.
#[derive(Debug, Clone, PartialEq)]
pub struct ElementInfo {
    /// Element name.
    pub name: String,
    /// Element type name.
    pub kind: &'static str,
    /// The node of each flange, in the order of [`ElementKind::flanges`].
    pub nodes: Vec<usize>,
    /// Relative coordinate `phi_rel = row . phi` for two-flange elements.
    pub rel: Option<Row>,
    /// Index into the force laws, if the element has one.
    pub law: Option<usize>,
    /// Index into the friction elements, if it is one.
    pub friction: Option<usize>,
    /// Index of the inertia node for Inertia and Mass.
    pub body: Option<usize>,
    /// True for torque sources and loads.
    pub source: bool,
    /// True when the element reports a friction mode (friction elements, elastic clutches).
    pub has_mode: bool,
    /// What a sensor reports (its `rel` row reads the angle and speed it measures).
    pub sensor: Option<Sensor>,
}

/// What a sensor element reports (see the sensors of [`ElementKind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sensor {
    /// `phi` of its flange.
    Angle,
    /// `w` of its flange.
    Speed,
    /// `phi_rel` between its flanges.
    RelAngle,
    /// `w_rel` between its flanges.
    RelSpeed,
    /// `tau` through its rigid joint.
    Torque,
    /// `power` through its rigid joint.
    Power,
    /// `tau`, `w` and `power` of its rigid joint.
    Multi,
    /// `a` of its flange.
    Acc,
    /// `a_rel` between its flanges.
    RelAcc,
}

/// What makes two thermal networks one structure: the nodes' ports, which are fixed, the
/// branches' ends, the heated elements, the number of heat flows and the temperature readers.
type ThermalLayout<'a> =
    (Vec<&'a Vec<String>>, Vec<bool>, Vec<(usize, usize, usize)>, Vec<(usize, usize)>, usize, Vec<(usize, usize)>);

/// A compiled, validated network ready to be simulated.
#[derive(Debug, Clone)]
pub struct Network {
    /// Number of free coordinates (nodes `0..n_dof`); nodes `n_dof..` are grounds.
    pub n_dof: usize,
    /// All nodes.
    pub nodes: Vec<Node>,
    /// Angles of the ground nodes (index `k - n_dof`).
    pub ground_phi: Vec<f64>,
    /// Inertia per free coordinate.
    pub mass: Vec<f64>,
    /// Signals referenced by index from laws.
    pub signals: Vec<Signal>,
    /// Force laws.
    pub laws: Vec<Law>,
    /// Element index of each law.
    pub law_element: Vec<usize>,
    /// Permanent rigid constraint rows (gears, planetary sets, rolling wheels).
    pub rows: Vec<Row>,
    /// Element of each permanent row.
    pub row_element: Vec<usize>,
    /// Right-hand side of each permanent row: `None` for `row . w = 0`, or the signal whose
    /// value the row prescribes (speed sources).
    pub row_rhs: Vec<Option<Prescribed>>,
    /// Kinematic clutches (Tiller's functional clutch).
    pub kinematic: Vec<KinematicElement>,
    /// Friction elements.
    pub friction: Vec<FrictionElement>,
    /// Elements in input order.
    pub elements: Vec<ElementInfo>,
    /// Initial angles of all nodes.
    pub phi_start: Vec<f64>,
    /// Initial speeds of all nodes.
    pub w_start: Vec<f64>,
    /// The thermal network, when the network has heat ports connected or thermal elements.
    pub thermal: Option<ThermalNetwork>,
}

impl Network {
    /// Human-readable name of a node: its flanges.
    pub fn node_name(&self, k: usize) -> String {
        let f = &self.nodes[k].flanges;
        if f.is_empty() { format!("node {k}") } else { f.join(" / ") }
    }

    /// What makes `other` a different structure for the solver, if anything: the elements
    /// (names, kinds, nodes), the constraint pattern (which nodes each permanent row joins,
    /// which rows prescribe a motion), the laws, friction elements, kinematic clutches and
    /// signals by count and element. `None`: the two differ in parameter values alone, and a
    /// simulation of one can continue with the other
    /// ([`crate::Simulation::update_parameters`]).
    pub fn structure_difference(&self, other: &Network) -> Option<String> {
        if self.n_dof != other.n_dof || self.nodes.len() != other.nodes.len() {
            return Some("the number of coordinates changes".into());
        }
        if self.elements.len() != other.elements.len() {
            return Some("elements are added or removed".into());
        }
        for (a, b) in self.elements.iter().zip(&other.elements) {
            if a.name != b.name || a.kind != b.kind || a.nodes != b.nodes {
                return Some(format!("element '{}' changes its name, kind or connections", a.name));
            }
            if a.law.is_some() != b.law.is_some() || a.friction.is_some() != b.friction.is_some() {
                return Some(format!("element '{}' changes what it is made of", a.name));
            }
        }
        let pattern = |r: &Row| r.entries.map(|(k, c)| if c == 0.0 { usize::MAX } else { k });
        if self.rows.len() != other.rows.len()
            || self.row_element != other.row_element
            || self.rows.iter().zip(&other.rows).any(|(a, b)| pattern(a) != pattern(b))
            || self.row_rhs.iter().zip(&other.row_rhs).any(|(a, b)| a.is_some() != b.is_some())
        {
            return Some("the rigid constraints change their pattern".into());
        }
        if self.laws.len() != other.laws.len()
            || self.law_element != other.law_element
            || self.laws.iter().zip(&other.laws).any(|(a, b)| std::mem::discriminant(a) != std::mem::discriminant(b))
        {
            return Some("the force laws change".into());
        }
        if self.friction.len() != other.friction.len()
            || self.friction.iter().zip(&other.friction).any(|(a, b)| {
                a.element != b.element
                    || pattern(&a.row) != pattern(&b.row)
                    || std::mem::discriminant(&a.law) != std::mem::discriminant(&b.law)
            })
        {
            return Some("the friction elements change".into());
        }
        if self.kinematic.len() != other.kinematic.len() || self.signals.len() != other.signals.len() {
            return Some("the kinematic clutches or the signals change".into());
        }
        fn layout(t: &Option<ThermalNetwork>) -> Option<ThermalLayout<'_>> {
            t.as_ref().map(|t| {
                let ports: Vec<&Vec<String>> = t.nodes.iter().map(|n| &n.ports).collect();
                let fixed: Vec<bool> = t.nodes.iter().map(|n| n.fixed.is_some()).collect();
                let branches: Vec<(usize, usize, usize)> = t.branches.iter().map(|b| (b.element, b.a, b.b)).collect();
                (ports, fixed, branches, t.heated.clone(), t.sources.len(), t.readers.clone())
            })
        }
        if layout(&self.thermal) != layout(&other.thermal) {
            return Some("the thermal network changes its connections".into());
        }
        None
    }

    /// Dense permanent constraint matrix over the free coordinates.
    pub(crate) fn dense_rows(&self, rows: &[Row], out: &mut [f64]) {
        let n = self.n_dof;
        out[..rows.len() * n].fill(0.0);
        for (i, r) in rows.iter().enumerate() {
            for &(k, c) in &r.entries {
                if c != 0.0 && k < n {
                    out[i * n + k] += c;
                }
            }
        }
    }

    fn check_constraints(&self, row_element: &[usize], specs: &[crate::model::ElementSpec]) -> Result<(), BuildError> {
        let n = self.n_dof;
        let r = self.rows.len();
        if r == 0 {
            return self.check_mass(&[], 0, &[]);
        }
        let mut g = vec![0.0; r * n.max(1)];
        self.dense_rows(&self.rows, &mut g);
        for (i, row) in self.rows.iter().enumerate() {
            if (0..n).all(|k| g[i * n + k] == 0.0) {
                let _ = row;
                return Err(BuildError::OverConstrained(format!(
                    "'{}' connects only fixed flanges, so it can neither move nor be satisfied in general",
                    specs[row_element[i]].name
                )));
            }
        }
        let mut piv = vec![0; r];
        let rank = linalg::rref(&mut g, r, n, 1e-12, &mut piv);
        if rank < r {
            return Err(BuildError::OverConstrained(format!(
                "the gears/planetary sets {} form a closed kinematic loop that repeats a constraint; remove one",
                row_element.iter().map(|&e| format!("'{}'", specs[e].name)).collect::<Vec<_>>().join(", ")
            )));
        }
        self.check_standstill()?;
        self.check_mass(&g, rank, &piv)
    }

    /// A body that the homogeneous permanent constraints alone hold still (a gear loop of
    /// unequal ratios) is an error; prescribed rows (speed sources) move bodies, they are fine.
    fn check_standstill(&self) -> Result<(), BuildError> {
        let n = self.n_dof;
        let rows: Vec<Row> =
            self.rows.iter().zip(&self.row_rhs).filter(|(_, r)| r.is_none()).map(|(r, _)| *r).collect();
        let r = rows.len();
        if r == 0 || n == 0 {
            return Ok(());
        }
        let mut g = vec![0.0; r * n];
        self.dense_rows(&rows, &mut g);
        let mut piv = vec![0; r];
        let rank = linalg::rref(&mut g, r, n, 1e-12, &mut piv);
        for (i, &k) in piv[..rank].iter().enumerate() {
            // A pivot row with no free-column entries pins its pivot coordinate to zero.
            let pinned = (0..n).all(|c| c == k || piv[..rank].contains(&c) || g[i * n + c] == 0.0);
            if pinned && self.mass[k] > 0.0 {
                return Err(BuildError::OverConstrained(format!(
                    "the gears/planetary sets lock [{}] to standstill (a kinematic loop of inconsistent ratios)",
                    self.node_name(k)
                )));
            }
        }
        Ok(())
    }

    /// The reduced inertia under the permanent constraints must be positive definite.
    fn check_mass(&self, rref: &[f64], rank: usize, piv_of_row: &[usize]) -> Result<(), BuildError> {
        let n = self.n_dof;
        let mut pivot = vec![false; n];
        for &c in &piv_of_row[..rank] {
            pivot[c] = true;
        }
        let free: Vec<usize> = (0..n).filter(|&c| !pivot[c]).collect();
        let m = free.len();
        // N: columns of the null space.
        let mut nmat = vec![0.0; n * m];
        for (j, &fc) in free.iter().enumerate() {
            nmat[fc * m + j] = 1.0;
            for i in 0..rank {
                nmat[piv_of_row[i] * m + j] = -rref[i * n + fc];
            }
        }
        let mut mr = vec![0.0; m * m];
        for a in 0..m {
            for b in 0..m {
                mr[a * m + b] = (0..n).map(|k| nmat[k * m + a] * self.mass[k] * nmat[k * m + b]).sum();
            }
        }
        let mut piv = vec![0; m];
        if m > 0 && linalg::lu_factor(&mut mr.clone(), m, &mut piv).is_err() {
            // Find the offending coordinate: a free column whose null vector carries no mass.
            for (j, _) in free.iter().enumerate() {
                let mj: f64 = (0..n).map(|k| nmat[k * m + j].powi(2) * self.mass[k]).sum();
                if mj == 0.0 {
                    let involved: Vec<String> = (0..n)
                        .filter(|&k| nmat[k * m + j] != 0.0)
                        .map(|k| format!("[{}]", self.node_name(k)))
                        .collect();
                    return Err(BuildError::Massless(involved.join(", ")));
                }
            }
            return Err(BuildError::Massless("some flanges".into()));
        }
        Ok(())
    }

    /// Solves the fixed start values and the kinematics for consistent initial angles and speeds.
    fn initialise(&mut self, specs: &[crate::model::ElementSpec]) -> Result<(), BuildError> {
        let n = self.n_dof;
        let n_nodes = self.nodes.len();
        let ground = |net: &Network, k: usize| if k >= n { net.ground_phi[k - n] } else { 0.0 };
        for pass in 0..2 {
            // pass 0: angles, pass 1: speeds. Equations: rows, then fixed start values.
            let mut eqs: Vec<(Vec<(usize, f64)>, f64, String)> = Vec::new();
            for (r, rhs) in self.rows.iter().zip(&self.row_rhs) {
                let items: Vec<(usize, f64)> = r.entries.iter().filter(|e| e.1 != 0.0).copied().collect();
                match rhs {
                    // A speed source fixes the speed; its angle comes from `phi_start`.
                    Some(Prescribed::Speed(sig)) if pass == 1 => {
                        eqs.push((items, self.signals[*sig].eval(0.0), "a speed source".into()))
                    }
                    Some(Prescribed::Speed(_)) => {}
                    // A position source fixes both.
                    Some(Prescribed::Position(sig)) => {
                        let v =
                            if pass == 0 { self.signals[*sig].eval(0.0) } else { self.signals[*sig].derivative(0.0) };
                        eqs.push((items, v, "a position source".into()))
                    }
                    Some(Prescribed::Offset(sig)) => {
                        let v = if pass == 0 { self.signals[*sig].eval(0.0) } else { 0.0 };
                        eqs.push((items, v, "a disc".into()))
                    }
                    Some(Prescribed::Move { phi, w, .. }) => {
                        let v = if pass == 0 { self.signals[*phi].eval(0.0) } else { self.signals[*w].eval(0.0) };
                        eqs.push((items, v, "a move source".into()))
                    }
                    None => eqs.push((items, 0.0, "a gear".into())),
                }
            }
            for (i, e) in specs.iter().enumerate() {
                let info = &self.elements[i];
                let (abs, rel) = match &e.kind {
                    ElementKind::Inertia { phi_start, w_start, .. }
                    | ElementKind::InitializeFlange { phi_start, w_start } => {
                        (if pass == 0 { *phi_start } else { *w_start }, None)
                    }
                    ElementKind::Mass { s_start, v_start, .. } => (if pass == 0 { *s_start } else { *v_start }, None),
                    ElementKind::Speed { phi_start, .. }
                    | ElementKind::ConstantSpeed { phi_start, .. }
                    | ElementKind::Accelerate { phi_start, .. }
                    | ElementKind::LinearSpeed { s_start: phi_start, .. } => {
                        (None, if pass == 0 { *phi_start } else { None })
                    }
                    ElementKind::Spring { phi_rel_start, w_rel_start, .. }
                    | ElementKind::Damper { phi_rel_start, w_rel_start, .. }
                    | ElementKind::SpringDamper { phi_rel_start, w_rel_start, .. }
                    | ElementKind::ElastoBacklash { phi_rel_start, w_rel_start, .. }
                    | ElementKind::ElastoBacklash2 { phi_rel_start, w_rel_start, .. }
                    | ElementKind::Clutch { phi_rel_start, w_rel_start, .. }
                    | ElementKind::OneWayClutch { phi_rel_start, w_rel_start, .. }
                    | ElementKind::ElasticClutch { phi_rel_start, w_rel_start, .. }
                    | ElementKind::RelativeStates { phi_rel_start, w_rel_start }
                    | ElementKind::Gearbox { phi_rel_start, w_rel_start, .. } => {
                        (None, if pass == 0 { *phi_rel_start } else { *w_rel_start })
                    }
                    _ => (None, None),
                };
                if let Some(v) = abs {
                    eqs.push((vec![(info.nodes[0], 1.0)], v, e.name.clone()));
                }
                if let (Some(v), Some(r)) = (rel, info.rel) {
                    let items: Vec<(usize, f64)> = r.entries.iter().filter(|e| e.1 != 0.0).copied().collect();
                    eqs.push((items, v, e.name.clone()));
                }
            }
            let m = eqs.len();
            let cols = n + 1;
            let mut a = vec![0.0; m * cols];
            for (i, (items, v, _)) in eqs.iter().enumerate() {
                let mut rhs = *v;
                for &(k, c) in items {
                    if k < n {
                        a[i * cols + k] += c;
                    } else if pass == 0 {
                        rhs -= c * ground(self, k);
                    }
                }
                a[i * cols + n] = rhs;
            }
            let mut piv = vec![0; m.max(1)];
            let scale = a.iter().fold(1.0f64, |s, v| s.max(v.abs()));
            let rank = linalg::rref(&mut a, m, cols, 1e-12 * scale, &mut piv);
            let what = if pass == 0 { "angle" } else { "speed" };
            // A pivot in the RHS column means contradicting values.
            if rank > 0 && piv[rank - 1] == n {
                let row = (0..m).find(|&i| a[i * cols + n].abs() > 0.0 && (0..n).all(|k| a[i * cols + k] == 0.0));
                let near = row
                    .map(|_| eqs.iter().map(|e| e.2.clone()).filter(|s| s != "a gear").collect::<Vec<_>>().join(", "));
                return Err(BuildError::ConflictingInitial { what, near: near.unwrap_or_default() });
            }
            if rank < n {
                let mut pivot = vec![false; n];
                for &p in &piv[..rank] {
                    pivot[p] = true;
                }
                let undetermined: Vec<String> =
                    (0..n).filter(|&k| !pivot[k]).map(|k| format!("[{}]", self.node_name(k))).collect();
                return Err(BuildError::MissingInitial {
                    what,
                    nodes: undetermined.join(", "),
                    hint: if pass == 0 {
                        "phi_start on an Inertia there, or phi_rel_start on an element joining it to a determined one"
                    } else {
                        "w_start on an Inertia there, or w_rel_start on an element joining it to a determined one"
                    },
                });
            }
            let mut x = vec![0.0; n_nodes];
            for i in 0..rank {
                x[piv[i]] = a[i * cols + n];
            }
            for k in n..n_nodes {
                x[k] = if pass == 0 { ground(self, k) } else { 0.0 };
            }
            if pass == 0 { self.phi_start = x } else { self.w_start = x }
        }
        Ok(())
    }
}
