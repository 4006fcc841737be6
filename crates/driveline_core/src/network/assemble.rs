//! Assembling a network from its description: element names indexed, flanges joined into
//! nodes, every element compiled into laws, constraint rows and friction rows.

use super::*;
use crate::elements::{Expr, SpeedCurve};
use crate::model::ElementSpec;

impl Network {
    /// Validates and compiles a network description.
    pub fn build(spec: &NetworkSpec) -> Result<Network, BuildError> {
        let mut net = Self::build_uninitialised(spec)?;
        net.initialise(&spec.elements)?;
        Ok(net)
    }

    /// [`Network::build`] without the initial state (the start values are not read; every
    /// free coordinate starts at zero): for a simulation that takes its state from another
    /// one ([`crate::Simulation::update_parameters`]).
    pub(crate) fn build_uninitialised(spec: &NetworkSpec) -> Result<Network, BuildError> {
        let specs = &spec.elements;
        let index = index_elements(specs)?;
        let (flange_connections, heat_connections) = split_connections(spec, &index)?;
        let mut slots = FlangeSlots::new(specs);
        let (mut dsu, connected) = slots.connect(specs, &flange_connections, &index)?;
        slots.check_connections(specs, &connected, &mut dsu)?;
        let mut asm = slots.nodes(specs, &mut dsu)?;
        asm.heat_connected = vec![false; specs.len()];
        for &(a, _, b, _) in &heat_connections {
            asm.heat_connected[a] = true;
            asm.heat_connected[b] = true;
        }
        for (i, e) in specs.iter().enumerate() {
            asm.add_element(i, e, &slots)?;
        }
        asm.resolve_limited_slip(specs, &index)?;
        asm.resolve_feedback(specs, &index)?;
        asm.condense_spring_junctions(specs, &slots);
        let mut thermal = ThermalNetwork::build(specs, &heat_connections, &mut asm.signals)?;
        if let Some(th) = &mut thermal {
            // The temperature-dependent laws read their heat port's temperature through an
            // input the solver sets after each step.
            for (k, law) in asm.laws.iter().enumerate() {
                if let Law::Eddy { temperature, .. } = *law
                    && let Some(node) = th.element_node[asm.law_element[k]]
                {
                    th.readers.push((node, temperature));
                }
            }
        }
        let row_element = asm.row_element.clone();
        let mut net = Network {
            n_dof: asm.n_dof,
            nodes: asm.nodes,
            ground_phi: asm.ground_phi,
            mass: asm.mass,
            signals: asm.signals,
            laws: asm.laws,
            law_element: asm.law_element,
            rows: asm.rows,
            row_element: asm.row_element,
            row_rhs: asm.row_rhs,
            kinematic: asm.kinematic,
            friction: asm.friction,
            elements: asm.elements,
            phi_start: Vec::new(),
            w_start: Vec::new(),
            thermal,
        };
        for (k, m) in net.mass.iter().enumerate() {
            net.nodes[k].inertia = *m;
        }
        net.check_constraints(&row_element, specs)?;
        let mut phi = vec![0.0; net.nodes.len()];
        phi[net.n_dof..].copy_from_slice(&net.ground_phi);
        net.phi_start = phi;
        net.w_start = vec![0.0; net.nodes.len()];
        Ok(net)
    }
}

/// Indexes the elements by name after validating each one's parameters: names must be unique,
/// and at most 64 elements may switch modes (friction elements and kinematic clutches).
fn index_elements(specs: &[ElementSpec]) -> Result<HashMap<&str, usize>, BuildError> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, e) in specs.iter().enumerate() {
        if index.insert(e.name.as_str(), i).is_some() {
            return Err(BuildError::DuplicateName(e.name.clone()));
        }
        validate_element(&e.name, &e.kind)?;
    }
    let switching =
        specs.iter().filter(|e| e.kind.is_friction() || matches!(e.kind, ElementKind::KinematicClutch { .. })).count();
    if switching > 64 {
        return Err(BuildError::TooManyFriction(switching));
    }
    Ok(index)
}

/// A flange connection by name, `("a.flange_b", "b.flange_a")`.
type Connection = (String, String);

/// Heat-port connections `(element, port, element, port)` (ports numbered as
/// [`ElementKind::heat_ports`] lists them).
type HeatConnection = (usize, usize, usize, usize);

/// Splits the connections into those of flanges and those of heat ports (which join only each
/// other).
fn split_connections<'a>(
    spec: &'a NetworkSpec,
    index: &HashMap<&str, usize>,
) -> Result<(Vec<&'a Connection>, Vec<HeatConnection>), BuildError> {
    let heat_port = |s: &str| -> Option<(usize, usize)> {
        let (el, port) = s.split_once('.')?;
        let &i = index.get(el)?;
        let k = spec.elements[i].kind.heat_ports().iter().position(|p| *p == port)?;
        Some((i, k))
    };
    let mut flanges = Vec::with_capacity(spec.connections.len());
    let mut heat = Vec::new();
    for c in &spec.connections {
        match (heat_port(&c.0), heat_port(&c.1)) {
            (Some(a), Some(b)) => heat.push((a.0, a.1, b.0, b.1)),
            (None, None) => flanges.push(c),
            _ => return Err(BuildError::HeatPortMismatch { a: c.0.clone(), b: c.1.clone() }),
        }
    }
    Ok((flanges, heat))
}

/// Every element's flanges numbered in one list ("slots"), element by element.
struct FlangeSlots {
    /// The first slot of each element.
    base: Vec<usize>,
    /// The number of slots.
    n: usize,
    /// The node each slot belongs to (once [`FlangeSlots::nodes`] has grouped them).
    node: Vec<usize>,
}

impl FlangeSlots {
    fn new(specs: &[ElementSpec]) -> Self {
        let mut base = Vec::with_capacity(specs.len());
        let mut n = 0;
        for e in specs {
            base.push(n);
            n += e.kind.flanges().len();
        }
        FlangeSlots { base, n, node: Vec::new() }
    }

    /// The slot of a flange named `"element.flange"`.
    fn slot_of(&self, specs: &[ElementSpec], index: &HashMap<&str, usize>, s: &str) -> Result<usize, BuildError> {
        let (el, fl) = s.split_once('.').ok_or_else(|| BuildError::BadFlangeRef(s.to_string()))?;
        let &i = index
            .get(el)
            .ok_or_else(|| BuildError::UnknownElement { flange: s.to_string(), element: el.to_string() })?;
        let fls = specs[i].kind.flanges();
        let k = fls.iter().position(|f| f.0 == fl).ok_or_else(|| BuildError::UnknownFlange {
            element: el.to_string(),
            kind: specs[i].kind.type_name(),
            flange: fl.to_string(),
            allowed: fls
                .iter()
                .map(|f| f.0)
                .chain(specs[i].kind.heat_ports().iter().copied())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
        Ok(self.base[i] + k)
    }

    /// The domain (rotational or translational) of a slot's flange.
    fn domain_of(&self, specs: &[ElementSpec], slot: usize) -> Domain {
        let i = self.base.partition_point(|&b| b <= slot) - 1;
        specs[i].kind.flanges()[slot - self.base[i]].1
    }

    /// Joins the connected slots (of one domain each). Returns the sets and which slots are
    /// connected at all.
    fn connect(
        &self,
        specs: &[ElementSpec],
        connections: &[&Connection],
        index: &HashMap<&str, usize>,
    ) -> Result<(Dsu, Vec<bool>), BuildError> {
        let mut dsu = Dsu((0..self.n).collect());
        let mut connected = vec![false; self.n];
        for (a, b) in connections.iter().copied() {
            let (sa, sb) = (self.slot_of(specs, index, a)?, self.slot_of(specs, index, b)?);
            if self.domain_of(specs, sa) != self.domain_of(specs, sb) {
                return Err(BuildError::DomainMismatch { a: a.clone(), b: b.clone() });
            }
            connected[sa] = true;
            connected[sb] = true;
            dsu.union(sa, sb);
        }
        Ok((dsu, connected))
    }

    /// Required flanges, supports and disconnected elements; joins the flanges an element
    /// holds rigidly together (an inertia's two flanges, a brake's shaft).
    fn check_connections(&self, specs: &[ElementSpec], connected: &[bool], dsu: &mut Dsu) -> Result<(), BuildError> {
        let base = &self.base;
        for (i, e) in specs.iter().enumerate() {
            let fls = e.kind.flanges();
            if e.kind.is_thermal() {
                continue;
            }
            if !fls.iter().enumerate().any(|(k, _)| connected[base[i] + k]) {
                return Err(BuildError::Disconnected(e.name.clone()));
            }
            for (k, &(fl, _, req)) in fls.iter().enumerate() {
                let c = connected[base[i] + k];
                match req {
                    Requirement::Required if !c => {
                        return Err(BuildError::DanglingFlange {
                            element: e.name.clone(),
                            flange: fl.to_string(),
                            kind: e.kind.type_name(),
                        });
                    }
                    Requirement::Support if c != e.kind.uses_support() => {
                        return Err(BuildError::SupportMismatch {
                            element: e.name.clone(),
                            state: if c { "connected" } else { "not connected" },
                            use_support: e.kind.uses_support(),
                            fix: c,
                        });
                    }
                    _ => {}
                }
            }
            match e.kind {
                ElementKind::Inertia { .. }
                | ElementKind::Mass { .. }
                | ElementKind::Brake { .. }
                | ElementKind::BearingFriction { .. } => dsu.union(base[i], base[i] + 1),
                _ => {}
            }
        }
        Ok(())
    }

    /// Groups the slots into nodes: the free ones first (the degrees of freedom), then the
    /// grounded sets (a `Fixed`), then one ground per unconnected internal support. Returns
    /// the assembly with its nodes, ready for the elements.
    fn nodes(&mut self, specs: &[ElementSpec], dsu: &mut Dsu) -> Result<Assembly, BuildError> {
        let (base, n_slots) = (&self.base, self.n);
        // Grounded sets (Fixed, internal supports) become grounds.
        let mut ground_angle: HashMap<usize, (f64, String)> = HashMap::new();
        let mut internal_ground = vec![false; n_slots];
        for (i, e) in specs.iter().enumerate() {
            if let ElementKind::Fixed { phi0 } = e.kind {
                let r = dsu.find(base[i]);
                if let Some((p, _)) = ground_angle.get(&r)
                    && *p != phi0
                {
                    return Err(BuildError::ConflictingFixed(e.name.clone()));
                }
                ground_angle.insert(r, (phi0, e.name.clone()));
            }
            for (k, &(_, _, req)) in e.kind.flanges().iter().enumerate() {
                if req == Requirement::Support && !e.kind.uses_support() {
                    internal_ground[base[i] + k] = true;
                }
            }
        }
        let mut root_node: HashMap<usize, usize> = HashMap::new();
        let mut dof_roots = Vec::new();
        let mut ground_roots = Vec::new();
        for s in 0..n_slots {
            if internal_ground[s] {
                continue;
            }
            let r = dsu.find(s);
            if root_node.contains_key(&r) {
                continue;
            }
            root_node.insert(r, usize::MAX);
            if ground_angle.contains_key(&r) { ground_roots.push(r) } else { dof_roots.push(r) }
        }
        let n_dof = dof_roots.len();
        let mut nodes = Vec::new();
        let mut ground_phi = Vec::new();
        for (k, &r) in dof_roots.iter().enumerate() {
            root_node.insert(r, k);
        }
        for (k, &r) in ground_roots.iter().enumerate() {
            root_node.insert(r, n_dof + k);
            ground_phi.push(ground_angle[&r].0);
        }
        for _ in 0..n_dof + ground_roots.len() {
            nodes.push(Node { flanges: Vec::new(), inertia: 0.0, domain: Domain::Rotational });
        }
        // Internal grounds: one per element support, at angle 0.
        let mut slot_node = vec![usize::MAX; n_slots];
        for s in 0..n_slots {
            if internal_ground[s] {
                slot_node[s] = nodes.len();
                nodes.push(Node { flanges: Vec::new(), inertia: 0.0, domain: Domain::Rotational });
                ground_phi.push(0.0);
            } else {
                slot_node[s] = root_node[&dsu.find(s)];
            }
        }
        for (i, e) in specs.iter().enumerate() {
            for (k, &(fl, dom, _)) in e.kind.flanges().iter().enumerate() {
                let nd = &mut nodes[slot_node[base[i] + k]];
                nd.flanges.push(format!("{}.{}", e.name, fl));
                nd.domain = dom;
            }
        }
        self.node = slot_node;
        Ok(Assembly {
            n_dof,
            nodes,
            ground_phi,
            mass: vec![0.0; n_dof],
            signals: Vec::new(),
            laws: Vec::new(),
            law_element: Vec::new(),
            rows: Vec::new(),
            row_rhs: Vec::new(),
            row_element: Vec::new(),
            kinematic: Vec::new(),
            friction: Vec::new(),
            elements: Vec::new(),
            heat_connected: Vec::new(),
            feedback: Vec::new(),
        })
    }
}

/// A network's parts as its elements are compiled, in the order of the elements (which fixes
/// every index: signals, laws, rows, friction elements).
struct Assembly {
    n_dof: usize,
    nodes: Vec<Node>,
    ground_phi: Vec<f64>,
    mass: Vec<f64>,
    signals: Vec<Signal>,
    laws: Vec<Law>,
    law_element: Vec<usize>,
    rows: Vec<Row>,
    row_rhs: Vec<Option<Prescribed>>,
    row_element: Vec<usize>,
    kinematic: Vec<KinematicElement>,
    friction: Vec<FrictionElement>,
    elements: Vec<ElementInfo>,
    /// Per element: a heat port is connected.
    heat_connected: Vec<bool>,
    /// The sources whose signal reads a sensor: `(law, signal)`, compiled last.
    feedback: Vec<(usize, Signal)>,
}

/// The relative-coordinate row `w_b - w_a`.
fn two(a: usize, b: usize) -> Row {
    Row::new(&[(a, -1.0), (b, 1.0)])
}

impl Assembly {
    /// Adds a signal; returns its index.
    fn signal(&mut self, s: &Signal) -> usize {
        self.signals.push(s.clone());
        self.signals.len() - 1
    }

    /// Adds element `i`'s law.
    fn push_law(&mut self, i: usize, law: Law, info: &mut ElementInfo) {
        info.law = Some(self.laws.len());
        self.laws.push(law);
        self.law_element.push(i);
    }

    /// Springs in series through a flange with no inertia (MSL allows it: the junction's angle
    /// is then algebraic). A junction that only springs touch (`Spring`, or `SpringDamper`
    /// with `d = 0`), joining at most two other nodes, sits where their torques balance:
    /// `sum c_k (phi_k - phi_j) + sum s_k c_k phi_rel0_k = 0` (`s_k` = +1 where the junction is
    /// the spring's `flange_b`, -1 where it is `flange_a`), written as the holonomic row
    /// `phi_j - sum (c_k / C) phi_k = sum s_k c_k phi_rel0_k / C`, `C = sum c_k`. Its reaction
    /// is zero (the balance holds exactly), so it does no work and each spring's torque is its
    /// own law's. A junction with a damper or other parts on it is left to the mass check,
    /// which refuses it: its angle would be a state of a first-order law.
    fn condense_spring_junctions(&mut self, specs: &[ElementSpec], slots: &FlangeSlots) {
        let n = self.n_dof;
        // Per node: (owner, c, other node, s c phi_rel0) of each spring on it, or `None` once
        // anything else touches it.
        let mut springs: Vec<Option<Vec<(usize, f64, usize, f64)>>> = vec![Some(Vec::new()); n];
        for (i, e) in specs.iter().enumerate() {
            let spring = match e.kind {
                ElementKind::Spring { c, phi_rel0, .. } => Some((c, phi_rel0)),
                ElementKind::SpringDamper { c, d: 0.0, phi_rel0, .. } => Some((c, phi_rel0)),
                _ => None,
            };
            let node = |k: usize| slots.node[slots.base[i] + k];
            for k in 0..e.kind.flanges().len() {
                let j = node(k);
                if j >= n {
                    continue;
                }
                match (spring, &mut springs[j]) {
                    (Some((c, r)), Some(list)) if c > 0.0 && node(1 - k) != j => {
                        list.push((i, c, node(1 - k), if k == 1 { c * r } else { -c * r }))
                    }
                    _ => springs[j] = None,
                }
            }
        }
        for (j, list) in springs.into_iter().enumerate() {
            let Some(list) = list.filter(|l| !l.is_empty() && self.mass[j] == 0.0) else { continue };
            let mut others: Vec<usize> = list.iter().map(|s| s.2).collect();
            others.sort_unstable();
            others.dedup();
            if others.len() > 2 || self.rows.iter().any(|r| r.entries.iter().any(|e| e.0 == j && e.1 != 0.0)) {
                continue;
            }
            let total: f64 = list.iter().map(|s| s.1).sum();
            let mut items = vec![(j, 1.0)];
            items.extend(list.iter().map(|s| (s.2, -s.1 / total)));
            let offset = list.iter().map(|s| s.3).sum::<f64>() / total;
            let rhs = (offset != 0.0).then(|| Prescribed::Offset(self.signal(&Signal::Constant(offset))));
            self.push_row(list[0].0, Row::new(&items), rhs);
        }
    }

    /// Adds element `i`'s permanent row, prescribed by `rhs` or kept at zero.
    fn push_row(&mut self, i: usize, row: Row, rhs: Option<Prescribed>) {
        self.rows.push(row);
        self.row_element.push(i);
        self.row_rhs.push(rhs);
    }

    /// Adds a torque (force) source from signal `s`: `+s` on `flange`, `-s` on `support`. A
    /// signal that reads a sensor becomes a [`Law::Feedback`], compiled once every element is
    /// in ([`Assembly::resolve_feedback`]).
    fn push_source(&mut self, i: usize, flange: usize, support: usize, s: &Signal, info: &mut ElementInfo) {
        info.source = true;
        if s.reads_motion() {
            self.feedback.push((self.laws.len(), s.clone()));
            self.push_law(i, Law::Feedback { flange, support, expr: Box::new(Expr::Sum(Vec::new())) }, info);
        } else {
            let signal = self.signal(s);
            self.push_law(i, Law::Source { flange, support, signal }, info);
        }
    }

    /// Compiles the signals of the sources that read a sensor ([`Law::Feedback`]).
    fn resolve_feedback(&mut self, specs: &[ElementSpec], index: &HashMap<&str, usize>) -> Result<(), BuildError> {
        for (law, s) in std::mem::take(&mut self.feedback) {
            let owner = &specs[self.law_element[law]].name;
            let compiled = self
                .compile_feedback(&s, index)
                .map_err(|message| BuildError::Signal { element: owner.clone(), message })?;
            if let Law::Feedback { expr, .. } = &mut self.laws[law] {
                **expr = compiled;
            }
        }
        Ok(())
    }

    /// `s` against the state: its parts that depend on time alone become signals.
    fn compile_feedback(&mut self, s: &Signal, index: &HashMap<&str, usize>) -> Result<Expr, String> {
        if !s.reads_motion() {
            return Ok(Expr::Signal(self.signal(s)));
        }
        let all = |v: &[Signal], me: &mut Self| {
            v.iter().map(|x| me.compile_feedback(x, index)).collect::<Result<Vec<_>, _>>()
        };
        Ok(match s {
            Signal::Measured(name) => {
                let info = index.get(name.as_str()).map(|&k| &self.elements[k]).ok_or_else(|| {
                    format!("`Measured(\"{name}\")` names no element; name an AngleSensor, SpeedSensor, RelAngleSensor or RelSpeedSensor")
                })?;
                match (info.sensor, info.rel) {
                    (Some(Sensor::Angle | Sensor::RelAngle), Some(r)) => Expr::Angle(r),
                    (Some(Sensor::Speed | Sensor::RelSpeed), Some(r)) => Expr::Speed(r),
                    _ => {
                        return Err(format!(
                            "`Measured(\"{name}\")` reads a {}; a signal can read an AngleSensor, SpeedSensor, RelAngleSensor or \
                             RelSpeedSensor (torques, powers and accelerations follow from the forces)",
                            info.kind
                        ));
                    }
                }
            }
            Signal::Sum(v) => Expr::Sum(all(v, self)?),
            Signal::Product(v) => Expr::Product(all(v, self)?),
            Signal::Gain(k, u) => Expr::Gain(*k, Box::new(self.compile_feedback(u, index)?)),
            Signal::OneMinus(u) => Expr::OneMinus(Box::new(self.compile_feedback(u, index)?)),
            Signal::Difference(a, b) => {
                Expr::Difference(Box::new(self.compile_feedback(a, index)?), Box::new(self.compile_feedback(b, index)?))
            }
            _ => {
                return Err(
                    "a sensor reading inside an `Integral` would be a state of its own; it is not supported".into()
                );
            }
        })
    }

    /// Adds a prescribed-motion source: the row `w_flange - w_support` imposed by `p`, also the
    /// element's relative coordinate.
    fn push_prescribed(&mut self, i: usize, nd: &[usize], p: Prescribed, info: &mut ElementInfo) {
        let row = Row::new(&[(nd[0], 1.0), (nd[1], -1.0)]);
        self.push_row(i, row, Some(p));
        info.source = true;
        info.rel = Some(row);
    }

    /// A fresh ground node of `domain` (a reaction's, or what a prescribed motion moves against).
    fn fresh_ground(&mut self, domain: Domain) -> usize {
        self.nodes.push(Node { flanges: Vec::new(), inertia: 0.0, domain });
        self.ground_phi.push(0.0);
        self.nodes.len() - 1
    }

    /// Compiles element `i` (`e`) into the network's parts.
    fn add_element(&mut self, i: usize, e: &ElementSpec, slots: &FlangeSlots) -> Result<(), BuildError> {
        if !matches!(e.kind, ElementKind::Torque { .. } | ElementKind::Torque2 { .. } | ElementKind::Force { .. })
            && e.kind.clone().signals_mut().iter().any(|s| s.reads_motion())
        {
            return Err(BuildError::Signal {
                element: e.name.clone(),
                message:
                    "a signal here reads a sensor (`Measured`); only the signal of a Torque, Torque2 or Force may \
                          depend on the motion"
                        .into(),
            });
        }
        let nd: Vec<usize> = (0..e.kind.flanges().len()).map(|k| slots.node[slots.base[i] + k]).collect();
        let mut info = ElementInfo {
            name: e.name.clone(),
            kind: e.kind.type_name(),
            nodes: nd.clone(),
            rel: None,
            law: None,
            friction: None,
            body: None,
            source: false,
            has_mode: e.kind.is_friction(),
            sensor: None,
        };
        match &e.kind {
            ElementKind::Inertia { .. }
            | ElementKind::Mass { .. }
            | ElementKind::Fixed { .. }
            | ElementKind::Torque { .. }
            | ElementKind::Speed { .. }
            | ElementKind::Position { .. }
            | ElementKind::ConstantTorque { .. }
            | ElementKind::TorqueStep { .. }
            | ElementKind::QuadraticSpeedDependentTorque { .. }
            | ElementKind::LinearSpeedDependentTorque { .. }
            | ElementKind::InverseSpeedDependentTorque { .. }
            | ElementKind::SignTorque { .. }
            | ElementKind::Torque2 { .. }
            | ElementKind::ConstantSpeed { .. }
            | ElementKind::Accelerate { .. }
            | ElementKind::Move { .. }
            | ElementKind::AngleSensor { .. }
            | ElementKind::SpeedSensor { .. }
            | ElementKind::RelAngleSensor { .. }
            | ElementKind::RelSpeedSensor { .. }
            | ElementKind::TorqueSensor { .. }
            | ElementKind::PowerSensor { .. }
            | ElementKind::MultiSensor { .. }
            | ElementKind::RelativeStates { .. }
            | ElementKind::InitializeFlange { .. }
            | ElementKind::AccSensor { .. }
            | ElementKind::RelAccSensor { .. }
            | ElementKind::QuadraticSpeedDependentForce { .. }
            | ElementKind::LinearSpeed { .. }
            | ElementKind::Force { .. }
            | ElementKind::Engine { .. }
            | ElementKind::EddyCurrentTorque { .. } => self.add_source(i, e, &nd, &mut info)?,
            // The thermal elements join the thermal network only.
            ElementKind::HeatCapacitor { .. }
            | ElementKind::ThermalConductor { .. }
            | ElementKind::Convection { .. }
            | ElementKind::FixedTemperature { .. }
            | ElementKind::FixedHeatFlow { .. } => {}
            ElementKind::KinematicClutch { .. }
            | ElementKind::DogClutch { .. }
            | ElementKind::TorqueConverter { .. }
            | ElementKind::IdealGear { .. }
            | ElementKind::LossyGear { .. }
            | ElementKind::Gearbox { .. }
            | ElementKind::IdealPlanetary { .. }
            | ElementKind::IdealRollingWheel { .. }
            | ElementKind::IdealGearR2T { .. }
            | ElementKind::Disc { .. }
            | ElementKind::Spring { .. }
            | ElementKind::Damper { .. }
            | ElementKind::SpringDamper { .. }
            | ElementKind::ElasticClutch { .. }
            | ElementKind::ElastoBacklash { .. }
            | ElementKind::ElastoBacklash2 { .. } => self.add_coupling(i, e, &nd, &mut info)?,
            ElementKind::LimitedSlip { .. }
            | ElementKind::Tyre { .. }
            | ElementKind::Clutch { .. }
            | ElementKind::OneWayClutch { .. }
            | ElementKind::Brake { .. }
            | ElementKind::BearingFriction { .. } => self.add_friction(i, e, &nd, &mut info)?,
        }
        self.elements.push(info);
        Ok(())
    }

    /// Adds a body (inertia, mass), a ground or a source (torque, force, prescribed motion, engine).
    fn add_source(
        &mut self,
        i: usize,
        e: &ElementSpec,
        nd: &[usize],
        info: &mut ElementInfo,
    ) -> Result<(), BuildError> {
        match &e.kind {
            ElementKind::Inertia { J, .. } | ElementKind::Mass { m: J, .. } => {
                if nd[0] < self.n_dof {
                    self.mass[nd[0]] += *J;
                }
                info.body = Some(nd[0]);
            }
            ElementKind::Fixed { .. } => {}
            ElementKind::Torque { tau, .. } => self.push_source(i, nd[0], nd[1], tau, info),
            ElementKind::AngleSensor {} | ElementKind::SpeedSensor {} => {
                // The flange's angle and speed, read through a one-entry row.
                info.rel = Some(Row::new(&[(nd[0], 1.0)]));
                info.sensor = Some(if e.kind.type_name() == "AngleSensor" { Sensor::Angle } else { Sensor::Speed });
            }
            // No torque: a relative coordinate to read (and to start from), or a flange's start.
            ElementKind::RelativeStates { .. } => info.rel = Some(two(nd[0], nd[1])),
            ElementKind::AccSensor {} => {
                info.rel = Some(Row::new(&[(nd[0], 1.0)]));
                info.sensor = Some(Sensor::Acc);
            }
            ElementKind::RelAccSensor {} => {
                info.rel = Some(two(nd[0], nd[1]));
                info.sensor = Some(Sensor::RelAcc);
            }
            ElementKind::InitializeFlange { .. } => {}
            ElementKind::RelAngleSensor {} | ElementKind::RelSpeedSensor {} => {
                info.rel = Some(two(nd[0], nd[1]));
                info.sensor =
                    Some(if e.kind.type_name() == "RelAngleSensor" { Sensor::RelAngle } else { Sensor::RelSpeed });
            }
            ElementKind::TorqueSensor {} | ElementKind::PowerSensor {} | ElementKind::MultiSensor {} => {
                // A rigid joint, w_a - w_b = 0, whose constraint torque is the measured one;
                // its speed is flange_a's (the row `rel` reads it).
                self.push_row(i, Row::new(&[(nd[0], 1.0), (nd[1], -1.0)]), None);
                info.rel = Some(Row::new(&[(nd[0], 1.0)]));
                info.sensor = Some(match e.kind.type_name() {
                    "TorqueSensor" => Sensor::Torque,
                    "PowerSensor" => Sensor::Power,
                    _ => Sensor::Multi,
                });
            }
            ElementKind::Torque2 { tau } => {
                // flange_a.tau = tau, flange_b.tau = -tau: a torque source on flange_b whose
                // reaction is flange_a.
                self.push_source(i, nd[1], nd[0], tau, info);
            }
            ElementKind::LinearSpeedDependentTorque { tau_nominal, w_nominal, torque_direction, .. } => {
                info.source = true;
                let curve = SpeedCurve::Linear {
                    nominal: *tau_nominal,
                    w_nominal: *w_nominal,
                    same_direction: *torque_direction,
                };
                self.push_law(i, Law::SpeedTorque { flange: nd[0], support: nd[1], curve }, info);
            }
            ElementKind::InverseSpeedDependentTorque { tau_nominal, w_nominal, w0, torque_direction, .. } => {
                info.source = true;
                let curve = SpeedCurve::Inverse {
                    power: *tau_nominal * *w_nominal,
                    w0: *w0,
                    same_direction: *torque_direction,
                };
                self.push_law(i, Law::SpeedTorque { flange: nd[0], support: nd[1], curve }, info);
            }
            ElementKind::SignTorque { tau_nominal, w0, reg, .. } => {
                info.source = true;
                let curve = SpeedCurve::Sign { tau: *tau_nominal, w0: *w0, reg: *reg };
                self.push_law(i, Law::SpeedTorque { flange: nd[0], support: nd[1], curve }, info);
            }
            ElementKind::EddyCurrentTorque { tau_nominal, w_nominal, TRef, alpha20, T, .. } => {
                info.source = true;
                let tau_nominal = self.signal(tau_nominal);
                // The heat port's temperature, set by the solver after each step (value and
                // rate: a first-order hold), or the fixed operating temperature.
                let temperature = if self.heat_connected[i] {
                    self.signal(&Signal::Input {
                        name: format!("{}.heatPort.T", e.name),
                        value: *T,
                        rate: 0.0,
                        since: 0.0,
                    })
                } else {
                    self.signal(&Signal::Constant(*T))
                };
                // MSL `linearTemperatureDependency`: alpha20 referred to TRef.
                let alpha = alpha20 / (1.0 + alpha20 * (TRef - 293.15));
                let law = Law::Eddy {
                    flange: nd[0],
                    support: nd[1],
                    tau_nominal,
                    temperature,
                    w_nominal: *w_nominal,
                    t_ref: *TRef,
                    alpha,
                };
                self.push_law(i, law, info);
            }
            ElementKind::Speed { w_ref, .. } => {
                let p = Prescribed::Speed(self.signal(w_ref));
                self.push_prescribed(i, nd, p, info);
            }
            ElementKind::Position { phi_ref, .. } => {
                let p = Prescribed::Position(self.signal(phi_ref));
                self.push_prescribed(i, nd, p, info);
            }
            ElementKind::Move { phi, w, a, .. } => {
                let p = Prescribed::Move { phi: self.signal(phi), w: self.signal(w), a: self.signal(a) };
                self.push_prescribed(i, nd, p, info);
            }
            ElementKind::Accelerate { a_ref, w_start, .. } => {
                // w(t) = w_start + the integral of a_ref from the start.
                let w = Signal::Integral { of: Box::new(a_ref.clone()), value: *w_start, since: 0.0 };
                let p = Prescribed::Speed(self.signal(&w));
                self.push_prescribed(i, nd, p, info);
            }
            ElementKind::ConstantSpeed { w_fixed, .. } => {
                let p = Prescribed::Speed(self.signal(&Signal::Constant(*w_fixed)));
                self.push_prescribed(i, nd, p, info);
            }
            ElementKind::ConstantTorque { tau_constant, .. } => {
                let s = self.signal(&Signal::Constant(*tau_constant));
                info.source = true;
                self.push_law(i, Law::Source { flange: nd[0], support: nd[1], signal: s }, info);
            }
            ElementKind::TorqueStep { step_torque, offset_torque, start_time, .. } => {
                let s = self.signal(&Signal::Step {
                    height: *step_torque,
                    offset: *offset_torque,
                    start_time: *start_time,
                });
                info.source = true;
                self.push_law(i, Law::Source { flange: nd[0], support: nd[1], signal: s }, info);
            }
            ElementKind::QuadraticSpeedDependentTorque { tau_nominal, w_nominal, torque_direction, .. } => {
                info.source = true;
                self.push_law(
                    i,
                    Law::Quadratic {
                        flange: nd[0],
                        support: nd[1],
                        nominal: *tau_nominal,
                        w_nominal: *w_nominal,
                        same_direction: *torque_direction,
                    },
                    info,
                );
            }
            ElementKind::QuadraticSpeedDependentForce { f_nominal, v_nominal, force_direction } => {
                info.source = true;
                let g = self.fresh_ground(Domain::Translational); // for the reaction
                self.push_law(
                    i,
                    Law::Quadratic {
                        flange: nd[0],
                        support: g,
                        nominal: *f_nominal,
                        w_nominal: *v_nominal,
                        same_direction: *force_direction,
                    },
                    info,
                );
            }
            ElementKind::LinearSpeed { v_ref, use_support, .. } => {
                let sidx = self.signal(v_ref);
                // Against the support, or a ground of its own.
                let g = if *use_support { nd[1] } else { self.fresh_ground(Domain::Translational) };
                let row = Row::new(&[(nd[0], 1.0), (g, -1.0)]);
                self.push_row(i, row, Some(Prescribed::Speed(sidx)));
                info.source = true;
                info.rel = Some(row);
            }
            ElementKind::Force { f } => {
                let g = self.fresh_ground(Domain::Translational); // for the reaction
                self.push_source(i, nd[0], g, f, info);
            }
            ElementKind::Engine { map, throttle, .. } => {
                let s = self.signal(throttle);
                info.source = true;
                // Validated above.
                let map = map.build().map_err(|m| param(&e.name, m))?;
                self.push_law(i, Law::Engine { flange: nd[0], support: nd[1], map, throttle: s }, info);
            }
            // (Every other kind is added by another of the `add_` methods.)
            _ => {}
        }
        Ok(())
    }

    /// Adds a coupling: a gear, a planetary set, a wheel, a spring or damper, a backlash, a dog, a
    /// kinematic or elastic clutch, a torque converter.
    fn add_coupling(
        &mut self,
        i: usize,
        e: &ElementSpec,
        nd: &[usize],
        info: &mut ElementInfo,
    ) -> Result<(), BuildError> {
        match &e.kind {
            ElementKind::KinematicClutch { command, shift_time } => {
                let row = two(nd[0], nd[1]);
                info.rel = Some(row);
                info.has_mode = true;
                let c = self.signal(command);
                let rho_signal = self.signal(&Signal::Constant(0.0));
                let tau_signal = self.signal(&Signal::Constant(0.0));
                self.push_law(i, Law::Coupling { a: nd[0], b: nd[1], signal: tau_signal }, info);
                self.kinematic.push(KinematicElement {
                    element: i,
                    row,
                    command: c,
                    shift_time: *shift_time,
                    rho_signal,
                    tau_signal,
                });
            }
            ElementKind::DogClutch { teeth, c, d, backlash, offset, engaged } => {
                info.rel = Some(two(nd[0], nd[1]));
                let s = self.signal(engaged);
                let pitch = std::f64::consts::TAU / *teeth as f64;
                self.push_law(
                    i,
                    Law::Dog {
                        a: nd[0],
                        b: nd[1],
                        c: *c,
                        d: *d,
                        half: backlash / 2.0,
                        pitch,
                        offset: *offset,
                        engaged: s,
                    },
                    info,
                );
            }
            ElementKind::TorqueConverter { map, .. } => {
                info.rel = Some(two(nd[0], nd[1]));
                self.push_law(
                    i,
                    Law::Converter { pump: nd[0], turbine: nd[1], support: nd[2], map: map.build() },
                    info,
                );
            }
            ElementKind::IdealGear { ratio, .. } => {
                // w_a - w_s - ratio (w_b - w_s) = 0
                self.push_row(i, Row::new(&[(nd[0], 1.0), (nd[1], -ratio), (nd[2], ratio - 1.0)]), None);
                info.rel = Some(two(nd[0], nd[1]));
            }
            ElementKind::LossyGear { ratio, loss_table, .. } => {
                self.push_row(i, Row::new(&[(nd[0], 1.0), (nd[1], -ratio), (nd[2], ratio - 1.0)]), None);
                info.rel = Some(two(nd[0], nd[1]));
                info.has_mode = true;
                let table = LossTable { rows: loss_table.clone(), ratio: *ratio };
                if !table.is_ideal() {
                    info.friction = Some(self.friction.len());
                    self.friction.push(FrictionElement {
                        element: i,
                        row: Row::new(&[(nd[0], 1.0), (nd[2], -1.0)]),
                        law: FrictionLaw::Lossy { table, gear_row: self.rows.len() - 1 },
                    });
                }
            }
            ElementKind::Gearbox { ratio, loss_table, c, d, b, .. } => {
                // The lossy gear from flange_a (nd[0]) to the mesh (nd[3]), against the support.
                let (a, fb, s, mesh) = (nd[0], nd[1], nd[2], nd[3]);
                self.push_row(i, Row::new(&[(a, 1.0), (mesh, -ratio), (s, ratio - 1.0)]), None);
                info.has_mode = true;
                let table = LossTable { rows: loss_table.clone(), ratio: *ratio };
                if !table.is_ideal() {
                    info.friction = Some(self.friction.len());
                    self.friction.push(FrictionElement {
                        element: i,
                        row: Row::new(&[(a, 1.0), (s, -1.0)]),
                        law: FrictionLaw::Lossy { table, gear_row: self.rows.len() - 1 },
                    });
                }
                // The elasticity from the mesh to flange_b (MSL: an ElastoBacklash, phi_rel0 = 0).
                info.rel = Some(two(mesh, fb));
                let law = if b.abs() <= 1e-10 {
                    Law::SpringDamper { a: mesh, b: fb, c: *c, d: *d, phi_rel0: 0.0 }
                } else {
                    Law::Backlash { a: mesh, b: fb, c: *c, d: *d, half: b / 2.0, phi_rel0: 0.0, capped: true }
                };
                self.push_law(i, law, info);
            }
            ElementKind::IdealPlanetary { ratio } => {
                // (1 + ratio) w_c - w_s - ratio w_r = 0
                self.push_row(i, Row::new(&[(nd[1], 1.0 + ratio), (nd[0], -1.0), (nd[2], -ratio)]), None);
            }
            ElementKind::IdealGearR2T { ratio } => {
                // w_R - ratio v_T = 0.
                self.push_row(i, Row::new(&[(nd[0], 1.0), (nd[1], -ratio)]), None);
                info.rel = Some(two(nd[0], nd[1]));
            }
            ElementKind::Disc { deltaPhi } => {
                // phi_b - phi_a = deltaPhi: the joint w_b - w_a = 0 from offset start angles.
                let s = self.signal(&Signal::Constant(*deltaPhi));
                let row = two(nd[0], nd[1]);
                self.push_row(i, row, Some(Prescribed::Offset(s)));
                info.rel = Some(row);
            }
            ElementKind::IdealRollingWheel { radius } => {
                self.push_row(i, Row::new(&[(nd[0], *radius), (nd[1], -1.0)]), None);
            }
            ElementKind::Spring { c, phi_rel0, .. } => {
                info.rel = Some(two(nd[0], nd[1]));
                self.push_law(i, Law::SpringDamper { a: nd[0], b: nd[1], c: *c, d: 0.0, phi_rel0: *phi_rel0 }, info);
            }
            ElementKind::Damper { d, .. } => {
                info.rel = Some(two(nd[0], nd[1]));
                self.push_law(i, Law::SpringDamper { a: nd[0], b: nd[1], c: 0.0, d: *d, phi_rel0: 0.0 }, info);
            }
            ElementKind::SpringDamper { c, d, phi_rel0, .. } => {
                info.rel = Some(two(nd[0], nd[1]));
                self.push_law(i, Law::SpringDamper { a: nd[0], b: nd[1], c: *c, d: *d, phi_rel0: *phi_rel0 }, info);
            }
            ElementKind::ElasticClutch { S, D, limit, .. } => {
                info.rel = Some(two(nd[0], nd[1]));
                info.has_mode = true;
                let l = self.signal(limit);
                self.push_law(i, Law::ElasticClutch { a: nd[0], b: nd[1], s: *S, d: *D, limit: l }, info);
            }
            ElementKind::ElastoBacklash { c, d, b, phi_rel0, .. }
            | ElementKind::ElastoBacklash2 { c, d, b, phi_rel0, .. } => {
                info.rel = Some(two(nd[0], nd[1]));
                // (ElastoBacklash caps the damping part by the spring part; ElastoBacklash2 not.)
                let capped = matches!(e.kind, ElementKind::ElastoBacklash { .. });
                // |b| <= 1e-10 is a plain spring-damper (MSL: avoids endless events).
                let law = if b.abs() <= 1e-10 {
                    Law::SpringDamper { a: nd[0], b: nd[1], c: *c, d: *d, phi_rel0: *phi_rel0 }
                } else {
                    Law::Backlash { a: nd[0], b: nd[1], c: *c, d: *d, half: b / 2.0, phi_rel0: *phi_rel0, capped }
                };
                self.push_law(i, law, info);
            }
            // (Every other kind is added by another of the `add_` methods.)
            _ => {}
        }
        Ok(())
    }

    /// Adds a friction element: a clutch, one-way clutch or brake, bearing friction, a limited-slip
    /// pack, a tyre.
    fn add_friction(
        &mut self,
        i: usize,
        e: &ElementSpec,
        nd: &[usize],
        info: &mut ElementInfo,
    ) -> Result<(), BuildError> {
        match &e.kind {
            ElementKind::LimitedSlip { preload, power_ramp, coast_ramp, .. } => {
                let row = two(nd[0], nd[1]);
                info.rel = Some(row);
                info.friction = Some(self.friction.len());
                // Input rows are resolved (and the carrier checked) once every row exists.
                self.friction.push(FrictionElement {
                    element: i,
                    row,
                    law: FrictionLaw::Ramp {
                        preload: *preload,
                        power: *power_ramp,
                        coast: *coast_ramp,
                        input: [(0, 0.0); 2],
                    },
                });
            }
            ElementKind::Tyre { radius, mf, load, v_low } => {
                let row = Row::new(&[(nd[0], *radius), (nd[1], -1.0)]);
                info.rel = Some(row);
                info.friction = Some(self.friction.len());
                let l = self.signal(load);
                self.friction.push(FrictionElement {
                    element: i,
                    row,
                    law: FrictionLaw::Tyre {
                        mf: *mf,
                        kappa_peak: mf.peak_slip(),
                        v_low: *v_low,
                        load: l,
                        ground: nd[1],
                    },
                });
            }
            ElementKind::Clutch { mu_pos, peak, cgeo, fn_max, f_normalized, .. }
            | ElementKind::OneWayClutch { mu_pos, peak, cgeo, fn_max, f_normalized, .. }
            | ElementKind::Brake { mu_pos, peak, cgeo, fn_max, f_normalized, .. } => {
                // Clutches: w_rel = w_b - w_a. Brake: the shaft relative to its support.
                let row = if matches!(e.kind, ElementKind::Brake { .. }) {
                    Row::new(&[(nd[0], 1.0), (nd[2], -1.0)])
                } else {
                    two(nd[0], nd[1])
                };
                info.rel = Some(row);
                info.friction = Some(self.friction.len());
                let s = self.signal(f_normalized);
                let (mu, peak, cgeo, fn_max) = (mu_pos.clone(), *peak, *cgeo, *fn_max);
                let law = if matches!(e.kind, ElementKind::OneWayClutch { .. }) {
                    FrictionLaw::OneWay { mu, peak, cgeo, fn_max, signal: s }
                } else {
                    FrictionLaw::Normal { mu, peak, cgeo, fn_max, signal: s }
                };
                self.friction.push(FrictionElement { element: i, row, law });
            }
            ElementKind::BearingFriction { tau_pos, peak, .. } => {
                let row = Row::new(&[(nd[0], 1.0), (nd[2], -1.0)]);
                info.rel = Some(row);
                info.friction = Some(self.friction.len());
                self.friction.push(FrictionElement {
                    element: i,
                    row,
                    law: FrictionLaw::Bearing { tau_pos: tau_pos.clone(), peak: *peak },
                });
            }
            // (Every other kind is added by another of the `add_` methods.)
            _ => {}
        }
        Ok(())
    }

    /// Limited-slip packs: the rows of the gears whose torques load them, resolved once every
    /// row exists, and the carrier checked to be an Inertia.
    fn resolve_limited_slip(&mut self, specs: &[ElementSpec], index: &HashMap<&str, usize>) -> Result<(), BuildError> {
        for fe in self.friction.iter_mut() {
            let ElementKind::LimitedSlip { input: names, carrier: cname, .. } = &specs[fe.element].kind else {
                continue;
            };
            let owner = &specs[fe.element].name;
            let FrictionLaw::Ramp { input, .. } = &mut fe.law else { continue };
            // An element of the given kind by name, or a message naming what is wanted.
            let lookup = |name: &str, key: &str, kind: &str, is: fn(&ElementKind) -> bool| {
                index.get(name).copied().filter(|&k| is(&specs[k].kind)).ok_or_else(|| {
                    param(owner, format!("`{key}` names `{name}`, which is not an {kind} of this network"))
                })
            };
            for (j, (g, scale)) in names.iter().enumerate() {
                let gi = lookup(g, "input", "IdealGear", |k| matches!(k, ElementKind::IdealGear { .. }))?;
                let ri = self.row_element.iter().position(|&e| e == gi).expect("every IdealGear has a row");
                let b = self.elements[gi].nodes[1];
                let cb = self.rows[ri].entries.iter().find(|x| x.0 == b).map_or(0.0, |x| x.1);
                input[j] = (ri, scale * cb);
            }
            lookup(cname, "carrier", "Inertia", |k| matches!(k, ElementKind::Inertia { .. }))?;
        }
        Ok(())
    }
}

/// Disjoint sets of flange slots (union-find).
struct Dsu(Vec<usize>);
impl Dsu {
    fn find(&mut self, x: usize) -> usize {
        let mut r = x;
        while self.0[r] != r {
            r = self.0[r];
        }
        let mut y = x;
        while self.0[y] != r {
            let n = self.0[y];
            self.0[y] = r;
            y = n;
        }
        r
    }
    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            // Keep the smaller index as root for a stable, input-ordered result.
            let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
            self.0[hi] = lo;
        }
    }
}
