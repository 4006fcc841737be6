//! Network assembly: flanges joined into nodes, elements compiled into laws, constraint rows and
//! friction rows, checked once so that the solver never meets a singular problem.

use crate::Signal;
use crate::elements::{FrictionElement, FrictionLaw, Law, LossTable, Row};
use crate::linalg;
use crate::model::{Domain, ElementKind, NetworkSpec, Requirement};
use std::collections::HashMap;

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
}

impl Prescribed {
    /// `(rho, rho')` of the row at `t`: the prescribed relative speed and its rate.
    pub fn rate(&self, signals: &[Signal], t: f64) -> (f64, f64) {
        match *self {
            Prescribed::Speed(k) => (signals[k].eval(t), signals[k].derivative(t)),
            Prescribed::Position(k) => (signals[k].derivative(t), signals[k].second_derivative(t)),
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
}

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
    /// Kinematic clutches (seed 000).
    pub kinematic: Vec<KinematicElement>,
    /// Friction elements.
    pub friction: Vec<FrictionElement>,
    /// Elements in input order.
    pub elements: Vec<ElementInfo>,
    /// Initial angles of all nodes.
    pub phi_start: Vec<f64>,
    /// Initial speeds of all nodes.
    pub w_start: Vec<f64>,
}

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

fn param(element: &str, message: String) -> BuildError {
    BuildError::Parameter { element: element.to_string(), message }
}

fn check(element: &str, name: &str, v: f64, ok: bool, allowed: &str) -> Result<(), BuildError> {
    if !v.is_finite() {
        let sep = if allowed.is_empty() { "" } else { " " };
        return Err(param(element, format!("`{name}` is {v}; it must be a finite number{sep}{allowed}")));
    }
    if !ok {
        return Err(param(element, format!("`{name}` is {v}; it must be {allowed}")));
    }
    Ok(())
}

fn check_opt(element: &str, name: &str, v: Option<f64>) -> Result<(), BuildError> {
    if let Some(v) = v {
        check(element, name, v, true, "")?;
    }
    Ok(())
}

/// Checks every parameter of one element. Public so that file loaders can report positions.
pub fn validate_element(name: &str, kind: &ElementKind) -> Result<(), BuildError> {
    use ElementKind::*;
    match kind {
        Inertia { J, phi_start, w_start } => {
            check(name, "J", *J, *J >= 0.0, ">= 0 kg m^2")?;
            check_opt(name, "phi_start", *phi_start)?;
            check_opt(name, "w_start", *w_start)
        }
        Fixed { phi0 } => check(name, "phi0", *phi0, true, ""),
        Torque { tau, .. } => tau.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m }),
        ConstantTorque { tau_constant, .. } => check(name, "tau_constant", *tau_constant, true, ""),
        Position { phi_ref, .. } => {
            phi_ref.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })
        }
        Speed { w_ref, phi_start, .. } => {
            w_ref.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })?;
            check_opt(name, "phi_start", *phi_start)
        }
        KinematicClutch { command, shift_time } => {
            command.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })?;
            check(name, "shift_time", *shift_time, *shift_time > 0.0, "> 0 s")
        }
        TorqueStep { step_torque, offset_torque, start_time, .. } => {
            check(name, "step_torque", *step_torque, true, "")?;
            check(name, "offset_torque", *offset_torque, true, "")?;
            check(name, "start_time", *start_time, true, "")
        }
        QuadraticSpeedDependentTorque { tau_nominal, w_nominal, .. } => {
            check(name, "tau_nominal", *tau_nominal, true, "")?;
            check(name, "w_nominal", *w_nominal, *w_nominal > 0.0, "> 0 rad/s")
        }
        IdealGear { ratio, .. } => check(name, "ratio", *ratio, *ratio != 0.0, "non-zero (phi_a/phi_b)"),
        LossyGear { ratio, loss_table, .. } => {
            check(name, "ratio", *ratio, *ratio != 0.0, "non-zero (phi_a/phi_b)")?;
            if loss_table.is_empty() {
                return Err(param(
                    name,
                    "`loss_table` is empty; give rows [|w_a|, eta_mf1, eta_mf2, tau_bf1, tau_bf2]".into(),
                ));
            }
            if loss_table[0][0] != 0.0 {
                return Err(param(name, format!("`loss_table` must start at |w_a| = 0, not {}", loss_table[0][0])));
            }
            for (k, row) in loss_table.iter().enumerate() {
                if row.iter().any(|v| !v.is_finite()) {
                    return Err(param(name, format!("`loss_table` row {k} holds a non-finite value")));
                }
                if k > 0 && row[0] <= loss_table[k - 1][0] {
                    return Err(param(
                        name,
                        format!(
                            "`loss_table` speeds must increase; row {k} has {} after {}",
                            row[0],
                            loss_table[k - 1][0]
                        ),
                    ));
                }
                if !(row[1] > 0.0 && row[1] <= 1.0 && row[2] > 0.0 && row[2] <= 1.0) {
                    return Err(param(
                        name,
                        format!("`loss_table` row {k}: efficiencies must be in (0, 1], got {} and {}", row[1], row[2]),
                    ));
                }
                if row[3] < 0.0 || row[4] < 0.0 {
                    return Err(param(
                        name,
                        format!("`loss_table` row {k}: bearing friction torques must be >= 0 N m"),
                    ));
                }
            }
            Ok(())
        }
        IdealPlanetary { ratio } => check(name, "ratio", *ratio, *ratio > 0.0, "> 0 (ring teeth / sun teeth)"),
        Spring { c, phi_rel0, phi_rel_start, w_rel_start } => {
            check(name, "c", *c, *c > 0.0, "> 0 N m/rad")?;
            check(name, "phi_rel0", *phi_rel0, true, "")?;
            check_opt(name, "phi_rel_start", *phi_rel_start)?;
            check_opt(name, "w_rel_start", *w_rel_start)
        }
        Damper { d, phi_rel_start, w_rel_start } => {
            check(name, "d", *d, *d >= 0.0, ">= 0 N m s/rad")?;
            check_opt(name, "phi_rel_start", *phi_rel_start)?;
            check_opt(name, "w_rel_start", *w_rel_start)
        }
        SpringDamper { c, d, phi_rel0, phi_rel_start, w_rel_start } => {
            check(name, "c", *c, *c > 0.0, "> 0 N m/rad")?;
            check(name, "d", *d, *d >= 0.0, ">= 0 N m s/rad")?;
            check(name, "phi_rel0", *phi_rel0, true, "")?;
            check_opt(name, "phi_rel_start", *phi_rel_start)?;
            check_opt(name, "w_rel_start", *w_rel_start)
        }
        ElastoBacklash { c, d, b, phi_rel0, phi_rel_start, w_rel_start } => {
            check(name, "c", *c, *c > 0.0, "> 0 N m/rad")?;
            check(name, "d", *d, *d >= 0.0, ">= 0 N m s/rad")?;
            check(name, "b", *b, *b >= 0.0, ">= 0 rad (total backlash)")?;
            check(name, "phi_rel0", *phi_rel0, true, "")?;
            check_opt(name, "phi_rel_start", *phi_rel_start)?;
            check_opt(name, "w_rel_start", *w_rel_start)
        }
        Clutch { mu_pos, peak, cgeo, fn_max, f_normalized, phi_rel_start, w_rel_start }
        | OneWayClutch { mu_pos, peak, cgeo, fn_max, f_normalized, phi_rel_start, w_rel_start } => {
            check_friction(name, mu_pos, *peak, *cgeo, *fn_max)?;
            f_normalized.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })?;
            check_opt(name, "phi_rel_start", *phi_rel_start)?;
            check_opt(name, "w_rel_start", *w_rel_start)
        }
        ElasticClutch { S, D, limit, phi_rel_start, w_rel_start } => {
            check(name, "S", *S, *S > 0.0, "> 0 N m/rad")?;
            check(name, "D", *D, *D >= 0.0, ">= 0 N m s/rad")?;
            limit.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })?;
            check_opt(name, "phi_rel_start", *phi_rel_start)?;
            check_opt(name, "w_rel_start", *w_rel_start)
        }
        Brake { mu_pos, peak, cgeo, fn_max, f_normalized, .. } => {
            check_friction(name, mu_pos, *peak, *cgeo, *fn_max)?;
            f_normalized.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })
        }
        BearingFriction { tau_pos, peak, .. } => {
            tau_pos.validate().map_err(|e| param(name, format!("`tau_pos`: {e}")))?;
            if tau_pos.points()[0].0 != 0.0 {
                return Err(param(name, "`tau_pos` must start at w = 0".into()));
            }
            if tau_pos.y_range().0 < 0.0 {
                return Err(param(name, "`tau_pos` torques must be >= 0 N m".into()));
            }
            check(name, "peak", *peak, *peak >= 1.0, ">= 1 (static / kinetic)")
        }
        Mass { m, s_start, v_start } => {
            check(name, "m", *m, *m >= 0.0, ">= 0 kg")?;
            check_opt(name, "s_start", *s_start)?;
            check_opt(name, "v_start", *v_start)
        }
        IdealRollingWheel { radius } => check(name, "radius", *radius, *radius > 0.0, "> 0 m"),
        LimitedSlip { preload, power_ramp, coast_ramp, input, .. } => {
            check(name, "preload", *preload, *preload >= 0.0, ">= 0 N m")?;
            check(name, "power_ramp", *power_ramp, *power_ramp >= 0.0, ">= 0")?;
            check(name, "coast_ramp", *coast_ramp, *coast_ramp >= 0.0, ">= 0")?;
            if input.is_empty() || input.len() > 2 {
                return Err(param(name, format!("`input` names {} gears; give one or two", input.len())));
            }
            for (g, sc) in input {
                check(name, "input", *sc, true, "")?;
                if g.is_empty() {
                    return Err(param(name, "`input` gear name is empty".into()));
                }
            }
            Ok(())
        }
        DogClutch { teeth, c, d, backlash, offset, engaged } => {
            if *teeth == 0 {
                return Err(param(name, "`teeth` is 0; a dog clutch has at least one dog".into()));
            }
            let pitch = std::f64::consts::TAU / *teeth as f64;
            check(name, "c", *c, *c > 0.0, "> 0 N m/rad")?;
            check(name, "d", *d, *d >= 0.0, ">= 0 N m s/rad")?;
            check(name, "backlash", *backlash, *backlash >= 0.0 && *backlash < pitch, "in [0, 2 pi / teeth) rad")?;
            check(name, "offset", *offset, offset.abs() <= pitch / 2.0, "within +-pi/teeth rad (seed 004)")?;
            engaged.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })
        }
        LinearSpeed { v_ref, s_start } => {
            v_ref.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })?;
            check_opt(name, "s_start", *s_start)
        }
        Force { f } => f.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m }),
        TorqueConverter { map, .. } => map.validate().map_err(|m| param(name, format!("`map`: {m}"))),
        Engine { map, throttle, .. } => {
            map.build().map_err(|m| param(name, format!("`map`: {m}")))?;
            throttle.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })
        }
        Tyre { radius, mf, load, v_low } => {
            check(name, "radius", *radius, *radius > 0.0, "> 0 m")?;
            check(name, "v_low", *v_low, *v_low > 0.0, "> 0 m/s")?;
            mf.validate().map_err(|m| param(name, format!("`mf`: {m}")))?;
            load.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })
        }
        QuadraticSpeedDependentForce { f_nominal, v_nominal, .. } => {
            check(name, "f_nominal", *f_nominal, true, "")?;
            check(name, "v_nominal", *v_nominal, *v_nominal > 0.0, "> 0 m/s")
        }
    }
}

fn check_friction(name: &str, mu: &crate::Table1D, peak: f64, cgeo: f64, fn_max: f64) -> Result<(), BuildError> {
    mu.validate().map_err(|e| param(name, format!("`mu_pos`: {e}")))?;
    if mu.points()[0].0 != 0.0 {
        return Err(param(name, format!("`mu_pos` must start at w = 0, not {}", mu.points()[0].0)));
    }
    if mu.y_range().0 < 0.0 {
        return Err(param(name, "`mu_pos` values must be >= 0".into()));
    }
    check(name, "peak", peak, peak >= 1.0, ">= 1 (static / kinetic friction)")?;
    check(name, "cgeo", cgeo, cgeo >= 0.0, ">= 0 m")?;
    check(name, "fn_max", fn_max, fn_max >= 0.0, ">= 0 N")
}

impl Network {
    /// Validates and compiles a network description.
    pub fn build(spec: &NetworkSpec) -> Result<Network, BuildError> {
        let specs = &spec.elements;
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, e) in specs.iter().enumerate() {
            if index.insert(e.name.as_str(), i).is_some() {
                return Err(BuildError::DuplicateName(e.name.clone()));
            }
            validate_element(&e.name, &e.kind)?;
        }
        let switching = specs
            .iter()
            .filter(|e| e.kind.is_friction() || matches!(e.kind, ElementKind::KinematicClutch { .. }))
            .count();
        if switching > 64 {
            return Err(BuildError::TooManyFriction(switching));
        }
        // Flange slots.
        let mut base = Vec::with_capacity(specs.len());
        let mut n_slots = 0;
        for e in specs {
            base.push(n_slots);
            n_slots += e.kind.flanges().len();
        }
        let slot_of = |s: &str| -> Result<usize, BuildError> {
            let (el, fl) = s.split_once('.').ok_or_else(|| BuildError::BadFlangeRef(s.to_string()))?;
            let &i = index
                .get(el)
                .ok_or_else(|| BuildError::UnknownElement { flange: s.to_string(), element: el.to_string() })?;
            let fls = specs[i].kind.flanges();
            let k = fls.iter().position(|f| f.0 == fl).ok_or_else(|| BuildError::UnknownFlange {
                element: el.to_string(),
                kind: specs[i].kind.type_name(),
                flange: fl.to_string(),
                allowed: fls.iter().map(|f| f.0).collect::<Vec<_>>().join(", "),
            })?;
            Ok(base[i] + k)
        };
        let domain_of = |slot: usize| -> Domain {
            let i = base.partition_point(|&b| b <= slot) - 1;
            specs[i].kind.flanges()[slot - base[i]].1
        };
        let mut dsu = Dsu((0..n_slots).collect());
        let mut connected = vec![false; n_slots];
        for (a, b) in &spec.connections {
            let (sa, sb) = (slot_of(a)?, slot_of(b)?);
            if domain_of(sa) != domain_of(sb) {
                return Err(BuildError::DomainMismatch { a: a.clone(), b: b.clone() });
            }
            connected[sa] = true;
            connected[sb] = true;
            dsu.union(sa, sb);
        }
        // Required flanges, supports, disconnected elements; internal rigid joins.
        for (i, e) in specs.iter().enumerate() {
            let fls = e.kind.flanges();
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
        // Group slots into nodes; grounded sets (Fixed, internal supports) become grounds.
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

        // Compile elements.
        let mut signals = Vec::new();
        let mut laws = Vec::new();
        let mut law_element = Vec::new();
        let mut rows = Vec::new();
        let mut row_rhs = Vec::new();
        let mut kinematic = Vec::new();
        let mut row_element = Vec::new();
        let mut friction = Vec::new();
        let mut elements = Vec::new();
        let mut mass = vec![0.0; n_dof];
        for (i, e) in specs.iter().enumerate() {
            let nd: Vec<usize> = (0..e.kind.flanges().len()).map(|k| slot_node[base[i] + k]).collect();
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
            };
            let mut push_law = |law: Law, info: &mut ElementInfo| {
                info.law = Some(laws.len());
                laws.push(law);
                law_element.push(i);
            };
            let mut signal = |s: &Signal| {
                signals.push(s.clone());
                signals.len() - 1
            };
            let two = |a: usize, b: usize| Row::new(&[(a, -1.0), (b, 1.0)]);
            match &e.kind {
                ElementKind::Inertia { J, .. } | ElementKind::Mass { m: J, .. } => {
                    if nd[0] < n_dof {
                        mass[nd[0]] += *J;
                    }
                    info.body = Some(nd[0]);
                }
                ElementKind::Fixed { .. } => {}
                ElementKind::Torque { tau, .. } => {
                    let s = signal(tau);
                    info.source = true;
                    push_law(Law::Source { flange: nd[0], support: nd[1], signal: s }, &mut info);
                }
                ElementKind::Speed { w_ref: sg, .. } | ElementKind::Position { phi_ref: sg, .. } => {
                    let sidx = signal(sg);
                    let row = Row::new(&[(nd[0], 1.0), (nd[1], -1.0)]);
                    rows.push(row);
                    row_element.push(i);
                    let prescribed = if matches!(e.kind, ElementKind::Speed { .. }) {
                        Prescribed::Speed(sidx)
                    } else {
                        Prescribed::Position(sidx)
                    };
                    row_rhs.push(Some(prescribed));
                    info.source = true;
                    info.rel = Some(row);
                }
                ElementKind::KinematicClutch { command, shift_time } => {
                    let row = two(nd[0], nd[1]);
                    info.rel = Some(row);
                    info.has_mode = true;
                    let c = signal(command);
                    let rho_signal = signal(&Signal::Constant(0.0));
                    let tau_signal = signal(&Signal::Constant(0.0));
                    push_law(Law::Coupling { a: nd[0], b: nd[1], signal: tau_signal }, &mut info);
                    kinematic.push(KinematicElement {
                        element: i,
                        row,
                        command: c,
                        shift_time: *shift_time,
                        rho_signal,
                        tau_signal,
                    });
                }
                ElementKind::ConstantTorque { tau_constant, .. } => {
                    let s = signal(&Signal::Constant(*tau_constant));
                    info.source = true;
                    push_law(Law::Source { flange: nd[0], support: nd[1], signal: s }, &mut info);
                }
                ElementKind::TorqueStep { step_torque, offset_torque, start_time, .. } => {
                    let s =
                        signal(&Signal::Step { height: *step_torque, offset: *offset_torque, start_time: *start_time });
                    info.source = true;
                    push_law(Law::Source { flange: nd[0], support: nd[1], signal: s }, &mut info);
                }
                ElementKind::QuadraticSpeedDependentTorque { tau_nominal, w_nominal, torque_direction, .. } => {
                    info.source = true;
                    push_law(
                        Law::Quadratic {
                            flange: nd[0],
                            support: nd[1],
                            nominal: *tau_nominal,
                            w_nominal: *w_nominal,
                            same_direction: *torque_direction,
                        },
                        &mut info,
                    );
                }
                ElementKind::QuadraticSpeedDependentForce { f_nominal, v_nominal, force_direction } => {
                    info.source = true;
                    let g = nodes.len(); // a fresh ground for the reaction
                    nodes.push(Node { flanges: Vec::new(), inertia: 0.0, domain: Domain::Translational });
                    ground_phi.push(0.0);
                    push_law(
                        Law::Quadratic {
                            flange: nd[0],
                            support: g,
                            nominal: *f_nominal,
                            w_nominal: *v_nominal,
                            same_direction: *force_direction,
                        },
                        &mut info,
                    );
                }
                ElementKind::DogClutch { teeth, c, d, backlash, offset, engaged } => {
                    info.rel = Some(two(nd[0], nd[1]));
                    let s = signal(engaged);
                    let pitch = std::f64::consts::TAU / *teeth as f64;
                    push_law(
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
                        &mut info,
                    );
                }
                ElementKind::LinearSpeed { v_ref, .. } => {
                    let sidx = signal(v_ref);
                    let g = nodes.len(); // a fresh ground to move against
                    nodes.push(Node { flanges: Vec::new(), inertia: 0.0, domain: Domain::Translational });
                    ground_phi.push(0.0);
                    let row = Row::new(&[(nd[0], 1.0), (g, -1.0)]);
                    rows.push(row);
                    row_element.push(i);
                    row_rhs.push(Some(Prescribed::Speed(sidx)));
                    info.source = true;
                    info.rel = Some(row);
                }
                ElementKind::Force { f } => {
                    let s = signal(f);
                    info.source = true;
                    let g = nodes.len(); // a fresh ground for the reaction
                    nodes.push(Node { flanges: Vec::new(), inertia: 0.0, domain: Domain::Translational });
                    ground_phi.push(0.0);
                    push_law(Law::Source { flange: nd[0], support: g, signal: s }, &mut info);
                }
                ElementKind::Engine { map, throttle, .. } => {
                    let s = signal(throttle);
                    info.source = true;
                    // Validated above.
                    let map = map.build().map_err(|m| param(&e.name, m))?;
                    push_law(Law::Engine { flange: nd[0], support: nd[1], map, throttle: s }, &mut info);
                }
                ElementKind::TorqueConverter { map, .. } => {
                    info.rel = Some(two(nd[0], nd[1]));
                    push_law(
                        Law::Converter { pump: nd[0], turbine: nd[1], support: nd[2], map: map.build() },
                        &mut info,
                    );
                }
                ElementKind::LimitedSlip { preload, power_ramp, coast_ramp, .. } => {
                    let row = two(nd[0], nd[1]);
                    info.rel = Some(row);
                    info.friction = Some(friction.len());
                    // Input rows and the carrier node are resolved once every row exists.
                    friction.push(FrictionElement {
                        element: i,
                        row,
                        law: FrictionLaw::Ramp {
                            preload: *preload,
                            power: *power_ramp,
                            coast: *coast_ramp,
                            input: [(0, 0.0); 2],
                            carrier: 0,
                        },
                    });
                }
                ElementKind::Tyre { radius, mf, load, v_low } => {
                    let row = Row::new(&[(nd[0], *radius), (nd[1], -1.0)]);
                    info.rel = Some(row);
                    info.friction = Some(friction.len());
                    let l = signal(load);
                    friction.push(FrictionElement {
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
                ElementKind::IdealGear { ratio, .. } => {
                    // w_a - w_s - ratio (w_b - w_s) = 0
                    rows.push(Row::new(&[(nd[0], 1.0), (nd[1], -ratio), (nd[2], ratio - 1.0)]));
                    row_element.push(i);
                    row_rhs.push(None);
                    info.rel = Some(two(nd[0], nd[1]));
                }
                ElementKind::LossyGear { ratio, loss_table, .. } => {
                    rows.push(Row::new(&[(nd[0], 1.0), (nd[1], -ratio), (nd[2], ratio - 1.0)]));
                    row_element.push(i);
                    row_rhs.push(None);
                    info.rel = Some(two(nd[0], nd[1]));
                    info.has_mode = true;
                    let table = LossTable { rows: loss_table.clone(), ratio: *ratio };
                    if !table.is_ideal() {
                        info.friction = Some(friction.len());
                        friction.push(FrictionElement {
                            element: i,
                            row: Row::new(&[(nd[0], 1.0), (nd[2], -1.0)]),
                            law: FrictionLaw::Lossy { table, gear_row: rows.len() - 1 },
                        });
                    }
                }
                ElementKind::IdealPlanetary { ratio } => {
                    // (1 + ratio) w_c - w_s - ratio w_r = 0
                    rows.push(Row::new(&[(nd[1], 1.0 + ratio), (nd[0], -1.0), (nd[2], -ratio)]));
                    row_element.push(i);
                    row_rhs.push(None);
                }
                ElementKind::IdealRollingWheel { radius } => {
                    rows.push(Row::new(&[(nd[0], *radius), (nd[1], -1.0)]));
                    row_element.push(i);
                    row_rhs.push(None);
                }
                ElementKind::Spring { c, phi_rel0, .. } => {
                    info.rel = Some(two(nd[0], nd[1]));
                    push_law(Law::SpringDamper { a: nd[0], b: nd[1], c: *c, d: 0.0, phi_rel0: *phi_rel0 }, &mut info);
                }
                ElementKind::Damper { d, .. } => {
                    info.rel = Some(two(nd[0], nd[1]));
                    push_law(Law::SpringDamper { a: nd[0], b: nd[1], c: 0.0, d: *d, phi_rel0: 0.0 }, &mut info);
                }
                ElementKind::SpringDamper { c, d, phi_rel0, .. } => {
                    info.rel = Some(two(nd[0], nd[1]));
                    push_law(Law::SpringDamper { a: nd[0], b: nd[1], c: *c, d: *d, phi_rel0: *phi_rel0 }, &mut info);
                }
                ElementKind::ElasticClutch { S, D, limit, .. } => {
                    info.rel = Some(two(nd[0], nd[1]));
                    info.has_mode = true;
                    let l = signal(limit);
                    push_law(Law::ElasticClutch { a: nd[0], b: nd[1], s: *S, d: *D, limit: l }, &mut info);
                }
                ElementKind::ElastoBacklash { c, d, b, phi_rel0, .. } => {
                    info.rel = Some(two(nd[0], nd[1]));
                    // |b| <= 1e-10 is a plain spring-damper (MSL: avoids endless events).
                    let law = if b.abs() <= 1e-10 {
                        Law::SpringDamper { a: nd[0], b: nd[1], c: *c, d: *d, phi_rel0: *phi_rel0 }
                    } else {
                        Law::Backlash { a: nd[0], b: nd[1], c: *c, d: *d, half: b / 2.0, phi_rel0: *phi_rel0 }
                    };
                    push_law(law, &mut info);
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
                    info.friction = Some(friction.len());
                    let s = signal(f_normalized);
                    let (mu, peak, cgeo, fn_max) = (mu_pos.clone(), *peak, *cgeo, *fn_max);
                    let law = if matches!(e.kind, ElementKind::OneWayClutch { .. }) {
                        FrictionLaw::OneWay { mu, peak, cgeo, fn_max, signal: s }
                    } else {
                        FrictionLaw::Normal { mu, peak, cgeo, fn_max, signal: s }
                    };
                    friction.push(FrictionElement { element: i, row, law });
                }
                ElementKind::BearingFriction { tau_pos, peak, .. } => {
                    let row = Row::new(&[(nd[0], 1.0), (nd[2], -1.0)]);
                    info.rel = Some(row);
                    info.friction = Some(friction.len());
                    friction.push(FrictionElement {
                        element: i,
                        row,
                        law: FrictionLaw::Bearing { tau_pos: tau_pos.clone(), peak: *peak },
                    });
                }
            }
            elements.push(info);
        }
        // Limited-slip packs: the gears' rows and the carrier's node.
        for fe in friction.iter_mut() {
            let ElementKind::LimitedSlip { input: names, carrier: cname, .. } = &specs[fe.element].kind else {
                continue;
            };
            let owner = &specs[fe.element].name;
            let FrictionLaw::Ramp { input, carrier, .. } = &mut fe.law else { continue };
            // An element of the given kind by name, or a message naming what is wanted.
            let lookup = |name: &str, key: &str, kind: &str, is: fn(&ElementKind) -> bool| {
                index.get(name).copied().filter(|&k| is(&specs[k].kind)).ok_or_else(|| {
                    param(owner, format!("`{key}` names `{name}`, which is not an {kind} of this network"))
                })
            };
            for (j, (g, scale)) in names.iter().enumerate() {
                let gi = lookup(g, "input", "IdealGear", |k| matches!(k, ElementKind::IdealGear { .. }))?;
                let ri = row_element.iter().position(|&e| e == gi).expect("every IdealGear has a row");
                let b = elements[gi].nodes[1];
                let cb = rows[ri].entries.iter().find(|x| x.0 == b).map_or(0.0, |x| x.1);
                input[j] = (ri, scale * cb);
            }
            let ci = lookup(cname, "carrier", "Inertia", |k| matches!(k, ElementKind::Inertia { .. }))?;
            *carrier = elements[ci].nodes[0];
        }
        let mut net = Network {
            n_dof,
            nodes,
            ground_phi,
            mass,
            signals,
            laws,
            law_element,
            rows,
            row_element: row_element.clone(),
            row_rhs,
            kinematic,
            friction,
            elements,
            phi_start: Vec::new(),
            w_start: Vec::new(),
        };
        for (k, m) in net.mass.iter().enumerate() {
            net.nodes[k].inertia = *m;
        }
        net.check_constraints(&row_element, specs)?;
        net.initialise(specs)?;
        Ok(net)
    }

    /// Human-readable name of a node: its flanges.
    pub fn node_name(&self, k: usize) -> String {
        let f = &self.nodes[k].flanges;
        if f.is_empty() { format!("node {k}") } else { f.join(" / ") }
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
                    None => eqs.push((items, 0.0, "a gear".into())),
                }
            }
            for (i, e) in specs.iter().enumerate() {
                let info = &self.elements[i];
                let (abs, rel) = match &e.kind {
                    ElementKind::Inertia { phi_start, w_start, .. } => {
                        (if pass == 0 { *phi_start } else { *w_start }, None)
                    }
                    ElementKind::Mass { s_start, v_start, .. } => (if pass == 0 { *s_start } else { *v_start }, None),
                    ElementKind::Speed { phi_start, .. } | ElementKind::LinearSpeed { s_start: phi_start, .. } => {
                        (None, if pass == 0 { *phi_start } else { None })
                    }
                    ElementKind::Spring { phi_rel_start, w_rel_start, .. }
                    | ElementKind::Damper { phi_rel_start, w_rel_start, .. }
                    | ElementKind::SpringDamper { phi_rel_start, w_rel_start, .. }
                    | ElementKind::ElastoBacklash { phi_rel_start, w_rel_start, .. }
                    | ElementKind::Clutch { phi_rel_start, w_rel_start, .. }
                    | ElementKind::OneWayClutch { phi_rel_start, w_rel_start, .. }
                    | ElementKind::ElasticClutch { phi_rel_start, w_rel_start, .. } => {
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
