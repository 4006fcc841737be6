//! Vehicle description -> rotational network. Every part becomes core elements solved by the
//! same coupled step; the controllers only write the network's run-time inputs.

use super::spec::{BodySpec, ClutchSpec, DifferentialSpec, DogModel, Drive, DrivelineLayout, GearboxSpec, VehicleSpec};
use crate::automatic::AutomaticSpec;
use crate::model::{ElementKind, ElementSpec, NetworkSpec};
use crate::torque_map::RPM;
use crate::{Signal, Table1D};

/// Standard gravity, m/s^2.
pub const G: f64 = 9.80665;

/// Wheel positions, in the order of every per-wheel array.
pub const WHEELS: [&str; 4] = ["fl", "fr", "rl", "rr"];

/// One gear of the box as built: its idler, dog and optional synchroniser, and the sleeve side
/// that selects it.
#[derive(Debug, Clone, PartialEq)]
pub struct GearSlot {
    /// Gear number: 1.. forward, -1 reverse.
    pub gear: i32,
    /// Ratio input / output.
    pub ratio: f64,
    /// Sleeve index.
    pub sleeve: usize,
    /// Side of the sleeve: +1 or -1.
    pub side: f64,
    /// Element names.
    pub idler: String,
    /// Dog clutch element name.
    pub dog: String,
    /// Synchroniser cone element name, if the box has synchros.
    pub synchro: Option<String>,
}

/// The built network with the names the controllers need.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The network.
    pub spec: NetworkSpec,
    /// Gears, reverse last.
    pub gears: Vec<GearSlot>,
    /// Number of sleeves.
    pub sleeves: usize,
    /// True for driven wheels, per [`WHEELS`].
    pub driven: [bool; 4],
    /// The planetary automatic, if the vehicle has one.
    pub automatic: Option<AutoLayout>,
}

/// Names in the network of a planetary automatic.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoLayout {
    /// Prefix of the gearbox's elements.
    pub prefix: String,
    /// Network names of the shift elements, in the gearbox file's order.
    pub elements: Vec<String>,
    /// The transmission controller's gear tables, formed once for the vehicles that share
    /// this layout.
    pub(crate) gear_tables: std::sync::Arc<crate::automatic::tcu::GearTables>,
}

fn el(name: &str, kind: ElementKind) -> ElementSpec {
    ElementSpec { name: name.to_string(), kind }
}

fn inertia(name: &str, j: f64, start: Option<(f64, f64)>) -> ElementSpec {
    el(name, ElementKind::Inertia { J: j, phi_start: start.map(|s| s.0), w_start: start.map(|s| s.1) })
}

fn input(name: &str) -> Signal {
    Signal::Input { name: name.to_string(), value: 0.0, rate: 0.0, since: 0.0 }
}

/// A Clutch element whose normalised force is the run-time input `force_input`.
fn friction(force_input: &str, mu: Table1D, peak: f64, cgeo: f64, fn_max: f64) -> ElementKind {
    ElementKind::Clutch {
        mu_pos: mu,
        peak,
        cgeo,
        fn_max,
        f_normalized: input(force_input),
        phi_rel_start: None,
        w_rel_start: None,
    }
}

/// What the tyres push against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Road {
    /// The vehicle's own body: a mass with drag, rolling resistance and grade (a complete
    /// longitudinal vehicle).
    Body,
    /// A game's chassis: each tyre runs on a ground whose speed the game writes every step
    /// (`ground_<wheel>.speed`, m/s), with the normal load the game computes; the game reads
    /// the tyre forces back.
    External,
    /// A game's rigid-body chassis: each tyre runs on a contact mass (its wheel's share of
    /// the body's mass, `ground_<wheel>`) pushed by a force input (`ground_<wheel>.force`)
    /// that the coupling forms from what the game writes; see [`crate::vehicle::chassis`].
    Chassis,
}

impl Layout {
    /// Why the network `sim` runs cannot carry the controllers of this layout, or `None` when
    /// it can: every element of the layout is there under its name and of its kind, and every
    /// run-time input the layout's elements take as a whole signal is still one of `sim`'s
    /// (the controllers find them by these names). A network rebuilt from edited parts (a part
    /// renamed, removed, or its kind or signal changed) may not; the controllers then refuse to
    /// start instead of failing.
    pub fn mismatch(&self, sim: &crate::Simulation) -> Option<String> {
        let net = sim.network();
        for e in &self.spec.elements {
            let want = e.kind.type_name();
            match net.elements.iter().find(|x| x.name == e.name) {
                None => {
                    return Some(format!("the vehicle's part '{}' ({want}) is missing (renamed or removed)", e.name));
                }
                Some(x) if x.kind != want => {
                    return Some(format!(
                        "the vehicle's part '{}' is a {}, its controllers need a {want}",
                        e.name, x.kind
                    ));
                }
                Some(_) => {}
            }
            let mut kind = e.kind.clone();
            for signal in kind.signals_mut() {
                if let Signal::Input { name, .. } = signal
                    && sim.input_id(name).is_none()
                {
                    return Some(format!(
                        "the vehicle's run-time input '{name}' (of part '{}') is no longer an input of its own",
                        e.name
                    ));
                }
            }
        }
        None
    }
}

/// The descriptions and layouts of the vehicles alive, which vehicles of an equal description
/// share ([`shared`]).
type Shared = (std::sync::Weak<VehicleSpec>, Road, std::sync::Weak<Layout>);
static SHARED: std::sync::Mutex<Vec<Shared>> = std::sync::Mutex::new(Vec::new());

/// The description `v` and its layout on `road`, as one copy that every vehicle alive of an
/// equal description (`==`) on the same road holds: a fleet spawned from one file keeps one
/// description and one layout, not one per vehicle. Built (the layout by [`layout`]) when no
/// such vehicle is alive.
pub fn shared(v: &VehicleSpec, road: Road) -> (std::sync::Arc<VehicleSpec>, std::sync::Arc<Layout>) {
    use std::sync::Arc;
    let mut all = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|(s, _, l)| s.strong_count() > 0 && l.strong_count() > 0);
    for (s, r, l) in all.iter() {
        if *r == road
            && let (Some(s), Some(l)) = (s.upgrade(), l.upgrade())
            && *s == *v
        {
            return (s, l);
        }
    }
    let (s, l) = (Arc::new(v.clone()), Arc::new(layout(v, road)));
    all.push((Arc::downgrade(&s), road, Arc::downgrade(&l)));
    (s, l)
}

/// Builds the network of a validated vehicle. The vehicle starts at rest, in neutral, with the
/// engine at idle and the clutch engaged.
pub fn layout(v: &VehicleSpec, road: Road) -> Layout {
    let mut e: Vec<ElementSpec> = Vec::new();
    let mut c: Vec<(String, String)> = Vec::new();
    let mut join = |a: &str, b: &str| c.push((a.to_string(), b.to_string()));
    engine(&mut e, &mut join, v);
    let mut gears = Vec::new();
    let mut automatic = None;
    if let (Some(cl), Some(gb)) = (&v.clutch, &v.gearbox) {
        gears = manual(&mut e, &mut join, cl, gb);
    } else if let Some(at) = &v.automatic {
        automatic = Some(planetary(&mut e, &mut join, at));
    }
    let sleeves = gears.iter().map(|g| g.sleeve + 1).max().unwrap_or(0);

    let driven = final_drives(&mut e, &mut join, &v.driveline);
    // Wheels: inertia, optional half shaft, brake, rolling resistance, tyre on the body.
    if road == Road::Body {
        body(&mut e, &mut join, &v.body);
    }
    if road == Road::Chassis {
        // The game's chassis along the wheels' headings: its mass and the force the coupling
        // holds on it.
        e.push(el("chassis", ElementKind::Mass { m: v.body.mass, s_start: Some(0.0), v_start: Some(0.0) }));
        e.push(el("chassis_force", ElementKind::Force { f: input("chassis.force") }));
        join("chassis_force.flange", "chassis.flange_a");
    }
    for (k, name) in WHEELS.iter().enumerate() {
        wheel(&mut e, &mut join, v, (k, name), driven[k], road);
    }
    Layout { spec: NetworkSpec { elements: e, connections: c }, gears, sleeves, driven, automatic }
}

/// Engine: crankshaft (with an automatic's impeller), torque map, starter.
fn engine(e: &mut Vec<ElementSpec>, join: &mut dyn FnMut(&str, &str), v: &VehicleSpec) {
    let eng = &v.engine;
    // An automatic's impeller turns with the crankshaft.
    let pump = v.automatic.as_ref().map_or(0.0, |a| a.pump_inertia);
    e.push(inertia("engine", eng.inertia + pump, Some((0.0, eng.idle_rpm * RPM))));
    e.push(el(
        "engine_torque",
        ElementKind::Engine { map: eng.map.clone(), throttle: input("engine.throttle"), use_support: false },
    ));
    e.push(el("starter", ElementKind::Torque { tau: input("starter.torque"), use_support: false }));
    join("engine_torque.flange", "engine.flange_a");
    join("starter.flange", "engine.flange_a");
}

/// Final drive, centre and axle differentials from the gearbox's `output` shaft to the axle
/// shafts. Returns which wheels are driven (front left, front right, rear left, rear right).
fn final_drives(e: &mut Vec<ElementSpec>, join: &mut dyn FnMut(&str, &str), d: &DrivelineLayout) -> [bool; 4] {
    let fd_ratio = d.final_drive;
    let axle = |e: &mut Vec<ElementSpec>,
                join: &mut dyn FnMut(&str, &str),
                tag: &str,
                from: &str,
                diff: DifferentialSpec,
                (left, right): (&str, &str)| {
        // `from` drives the carrier through the final drive.
        let fd = format!("final_drive_{tag}");
        let carrier = format!("carrier_{tag}");
        e.push(el(&fd, ElementKind::IdealGear { ratio: fd_ratio, use_support: false }));
        e.push(inertia(&carrier, 0.01, None));
        join(&format!("{fd}.flange_a"), from);
        join(&format!("{fd}.flange_b"), &format!("{carrier}.flange_a"));
        let input = vec![(fd.clone(), 1.0)];
        let diff_name = format!("diff_{tag}");
        split(e, join, &diff_name, (&format!("{carrier}.flange_b"), &carrier), input, diff, (left, right), 0.5);
    };
    let shaft = |w: &str| format!("axle_{w}");
    let (fl, fr, rl, rr) = (shaft("fl"), shaft("fr"), shaft("rl"), shaft("rr"));
    match &d.drive {
        Drive::Rear => {
            axle(e, join, "r", "output.flange_b", d.differential, (&rl, &rr));
            [false, false, true, true]
        }
        Drive::Front => {
            axle(e, join, "f", "output.flange_b", d.differential, (&fl, &fr));
            [true, true, false, false]
        }
        Drive::All { front_share, centre } => {
            e.push(inertia("prop_f", 0.005, None));
            e.push(inertia("prop_r", 0.01, None));
            let s = 1.0 / d.final_drive;
            let input = vec![("final_drive_f".to_string(), s), ("final_drive_r".to_string(), s)];
            let ends = ("output.flange_b", "output");
            split(e, join, "centre", ends, input, *centre, ("prop_f", "prop_r"), *front_share);
            axle(e, join, "f", "prop_f.flange_b", d.differential, (&fl, &fr));
            axle(e, join, "r", "prop_r.flange_b", d.differential, (&rl, &rr));
            [true; 4]
        }
    }
}

/// The body on its 1-D road, with aerodynamic drag and the grade's force.
fn body(e: &mut Vec<ElementSpec>, join: &mut dyn FnMut(&str, &str), b: &BodySpec) {
    e.push(el("body", ElementKind::Mass { m: b.mass, s_start: Some(0.0), v_start: Some(0.0) }));
    let v_nom = 10.0;
    e.push(el(
        "drag",
        ElementKind::QuadraticSpeedDependentForce {
            f_nominal: -0.5 * b.air_density * b.drag_area * v_nom * v_nom,
            v_nominal: v_nom,
            force_direction: false,
        },
    ));
    e.push(el("grade", ElementKind::Force { f: input("grade.force") }));
    join("drag.flange", "body.flange_a");
    join("grade.flange", "body.flange_a");
}

/// Wheel `k` (`name`): inertia, half shaft or rigid hub when `driven`, brake, rolling
/// resistance and tyre, on the body or on its own external ground.
fn wheel(
    e: &mut Vec<ElementSpec>,
    join: &mut dyn FnMut(&str, &str),
    v: &VehicleSpec,
    (k, name): (usize, &str),
    driven: bool,
    road: Road,
) {
    let (w, b) = (&v.wheels, &v.body);
    let shaft = |w: &str| format!("axle_{w}");
    let front = k < 2;
    let wheel = format!("wheel_{name}");
    e.push(inertia(&wheel, w.inertia, Some((0.0, 0.0))));
    if driven {
        let from = shaft(name);
        if let Some(kh) = w.half_shaft_stiffness {
            // 1 % of critical damping against the wheel inertia.
            let dh = 0.02 * (kh * w.inertia).sqrt();
            let hs = format!("half_shaft_{name}");
            e.push(el(
                &hs,
                ElementKind::SpringDamper {
                    c: kh,
                    d: dh,
                    phi_rel0: 0.0,
                    phi_rel_start: Some(0.0),
                    w_rel_start: Some(0.0),
                },
            ));
            join(&format!("{hs}.flange_a"), &format!("{from}.flange_b"));
            join(&format!("{hs}.flange_b"), &format!("{wheel}.flange_a"));
        } else {
            // A rigid hub (ratio 1): its constraint torque is the drive torque on the wheel.
            let hub = format!("hub_{name}");
            e.push(el(&hub, ElementKind::IdealGear { ratio: 1.0, use_support: false }));
            join(&format!("{hub}.flange_a"), &format!("{from}.flange_b"));
            join(&format!("{hub}.flange_b"), &format!("{wheel}.flange_a"));
        }
    }
    let t_max = if front { w.front_brake } else { w.rear_brake + w.parking_brake };
    let brake = format!("brake_{name}");
    e.push(el(
        &brake,
        ElementKind::Brake {
            mu_pos: Table1D::constant(1.0),
            peak: w.brake_peak,
            cgeo: 1.0,
            fn_max: t_max.max(0.0),
            f_normalized: input(&format!("{brake}.command")),
            use_support: false,
        },
    ));
    join(&format!("{brake}.flange_a"), &format!("{wheel}.flange_b"));
    let axle_share = if front { b.front_weight } else { 1.0 - b.front_weight };
    let fz = 0.5 * axle_share * b.mass * G;
    let roll = format!("rolling_{name}");
    e.push(el(
        &roll,
        ElementKind::BearingFriction {
            tau_pos: Table1D::constant(w.rolling_resistance * fz * w.radius),
            peak: 1.0,
            use_support: false,
        },
    ));
    join(&format!("{roll}.flange_a"), &format!("{wheel}.flange_b"));
    let tyre = format!("tyre_{name}");
    e.push(el(
        &tyre,
        ElementKind::Tyre { radius: w.radius, mf: w.tyre, load: input(&format!("{tyre}.load")), v_low: 1.0 },
    ));
    join(&format!("{tyre}.wheel"), &format!("{wheel}.flange_b"));
    match road {
        Road::Body => join(&format!("{tyre}.ground"), "body.flange_a"),
        // The ground under the wheel at a speed the game writes: against the fixed frame, or
        // (a chassis) relative to the chassis' mass, at what its yaw and pitch give that corner.
        Road::External | Road::Chassis => {
            let ground = format!("ground_{name}");
            let use_support = road == Road::Chassis;
            e.push(el(
                &ground,
                ElementKind::LinearSpeed { v_ref: input(&format!("{ground}.speed")), s_start: Some(0.0), use_support },
            ));
            join(&format!("{tyre}.ground"), &format!("{ground}.flange"));
            if use_support {
                join(&format!("{ground}.support"), "chassis.flange_a");
            }
        }
    }
}

/// The share of the body's mass that wheel `k` ([`WHEELS`] order) carries at rest, kg: half
/// its axle's ([`Road::Chassis`]'s contact masses).
pub fn chassis_mass(b: &BodySpec, k: usize) -> f64 {
    let axle_share = if k < 2 { b.front_weight } else { 1.0 - b.front_weight };
    0.5 * axle_share * b.mass
}

/// Driver's clutch (with its disc and optional torsional damper) and a layshaft gearbox: one
/// idler per gear geared to the input shaft, dogs (and synchros) to the `output` shaft.
fn manual(
    e: &mut Vec<ElementSpec>,
    join: &mut dyn FnMut(&str, &str),
    cl: &ClutchSpec,
    gb: &GearboxSpec,
) -> Vec<GearSlot> {
    // Clutch, disc, optional torsional damper.
    e.push(el(
        "clutch",
        ElementKind::Clutch {
            mu_pos: cl.mu.clone(),
            peak: cl.peak,
            cgeo: cl.cgeo(),
            fn_max: cl.clamp_force,
            f_normalized: input("clutch.force"),
            phi_rel_start: Some(0.0),
            w_rel_start: Some(0.0),
        },
    ));
    join("clutch.flange_a", "engine.flange_b");
    e.push(inertia("disc", cl.disc_inertia, None));
    join("clutch.flange_b", "disc.flange_a");
    let input_shaft = if let Some(d) = &cl.damper {
        e.push(el(
            "clutch_damper",
            ElementKind::SpringDamper {
                c: d.stiffness,
                d: d.damping,
                phi_rel0: 0.0,
                phi_rel_start: Some(0.0),
                w_rel_start: Some(0.0),
            },
        ));
        e.push(inertia("input_shaft", 0.005, None));
        join("clutch_damper.flange_a", "disc.flange_b");
        join("clutch_damper.flange_b", "input_shaft.flange_a");
        "input_shaft.flange_b"
    } else {
        "disc.flange_b"
    };

    // Gearbox: one idler per gear, geared to the input shaft; dogs (and synchros) to the output.
    e.push(inertia("output", gb.output_inertia, None));
    let mut gears = Vec::new();
    let mut list: Vec<(i32, f64)> = gb.ratios.iter().enumerate().map(|(k, r)| (k as i32 + 1, *r)).collect();
    if let Some(r) = gb.reverse {
        list.push((-1, r));
    }
    for (k, &(gear, ratio)) in list.iter().enumerate() {
        let tag = if gear < 0 { "r".to_string() } else { gear.to_string() };
        let (idler, dog, mesh) = (format!("idler{tag}"), format!("dog{tag}"), format!("gear{tag}"));
        e.push(el(&mesh, ElementKind::IdealGear { ratio, use_support: false }));
        e.push(inertia(&idler, gb.idler_inertia, None));
        join(&format!("{mesh}.flange_a"), input_shaft);
        join(&format!("{mesh}.flange_b"), &format!("{idler}.flange_a"));
        match gb.dog.model {
            DogModel::Friction => e.push(el(
                &dog,
                friction(&format!("{dog}.engagement"), Table1D::constant(1.0), 1.0, 1.0, gb.dog.max_torque),
            )),
            DogModel::Backlash => e.push(el(
                &dog,
                ElementKind::DogClutch {
                    teeth: gb.dog.teeth,
                    c: gb.dog.stiffness,
                    d: gb.dog.damping,
                    backlash: gb.dog.backlash_deg.to_radians(),
                    offset: 0.0,
                    engaged: input(&format!("{dog}.engagement")),
                },
            )),
        }
        join(&format!("{dog}.flange_a"), &format!("{idler}.flange_b"));
        join(&format!("{dog}.flange_b"), "output.flange_a");
        let synchro = gb.synchro.map(|s| {
            let name = format!("synchro{tag}");
            let cgeo = s.cone_radius / s.cone_angle_deg.to_radians().sin();
            e.push(el(&name, friction(&format!("{name}.force"), Table1D::constant(s.mu), 1.0, cgeo, 1.0)));
            join(&format!("{name}.flange_a"), &format!("{idler}.flange_b"));
            join(&format!("{name}.flange_b"), "output.flange_a");
            name
        });
        // Sleeves pair consecutive gears (1-2, 3-4, ...); reverse gets a sleeve of its own.
        let (sleeve, side) =
            if gear < 0 { (gb.ratios.len().div_ceil(2), 1.0) } else { (k / 2, if k % 2 == 0 { 1.0 } else { -1.0 }) };
        gears.push(GearSlot { gear, ratio, sleeve, side, idler, dog, synchro });
    }
    gears
}

/// Torque converter with lock-up clutch, planetary gearbox (elements prefixed `gb_`), park
/// pawl on the `output` shaft.
fn planetary(e: &mut Vec<ElementSpec>, join: &mut dyn FnMut(&str, &str), at: &AutomaticSpec) -> AutoLayout {
    let gb = at.gearbox().expect("validated: the gearbox is resolved");
    e.push(el("converter", ElementKind::TorqueConverter { map: at.converter.clone(), use_support: false }));
    e.push(inertia("turbine", at.turbine_inertia, Some((0.0, 0.0))));
    join("converter.pump", "engine.flange_b");
    join("converter.turbine", "turbine.flange_a");
    let lu = &at.lockup;
    e.push(el("lockup", friction("lockup.force", lu.mu.clone(), lu.peak, lu.cgeo(), lu.max_force)));
    join("lockup.flange_a", "engine.flange_b");
    join("lockup.flange_b", "turbine.flange_a");
    let prefix = "gb_";
    let (elements, connections, gb_in, gb_out) = gb.build(prefix);
    e.extend(elements);
    for (a, b) in &connections {
        join(a, b);
    }
    join("turbine.flange_b", &gb_in);
    e.push(inertia("output", at.output_inertia, None));
    join(&gb_out, "output.flange_a");
    e.push(el(
        "park",
        ElementKind::Brake {
            mu_pos: Table1D::constant(1.0),
            peak: 1.0,
            cgeo: 1.0,
            fn_max: at.park.holding_torque,
            f_normalized: input("park.engage"),
            use_support: false,
        },
    ));
    join("park.flange_a", "output.flange_a");
    AutoLayout {
        prefix: prefix.to_string(),
        elements: gb.elements.iter().map(|x| format!("{prefix}{}", x.name)).collect(),
        gear_tables: std::sync::Arc::new(crate::automatic::tcu::GearTables::new(gb)),
    }
}

/// A differential between `left` and `right` (inertia element names) driven at the flange
/// `input` of the `carrier` element, with `share` of the torque to the left. `gears` feed an LSD
/// ramp (see [`ElementKind::LimitedSlip`]).
#[allow(clippy::too_many_arguments)]
fn split(
    e: &mut Vec<ElementSpec>,
    join: &mut dyn FnMut(&str, &str),
    name: &str,
    (input, carrier): (&str, &str),
    gears: Vec<(String, f64)>,
    diff: DifferentialSpec,
    (left, right): (&str, &str),
    share: f64,
) {
    for side in [left, right] {
        if !e.iter().any(|x| x.name == side) {
            e.push(inertia(side, 0.002, None));
        }
    }
    if diff == DifferentialSpec::Locked {
        join(input, &format!("{left}.flange_a"));
        join(input, &format!("{right}.flange_a"));
        return;
    }
    // Planetary: sun -> left, ring -> right; the sun takes 1/(1+ratio) of the carrier torque.
    let ratio = (1.0 - share) / share;
    e.push(el(name, ElementKind::IdealPlanetary { ratio }));
    join(&format!("{name}.carrier"), input);
    join(&format!("{name}.sun"), &format!("{left}.flange_a"));
    join(&format!("{name}.ring"), &format!("{right}.flange_a"));
    match diff {
        DifferentialSpec::ClutchPack { preload, power_ramp, coast_ramp } => {
            let pack = format!("{name}_lsd");
            let carrier = carrier.to_string();
            e.push(el(&pack, ElementKind::LimitedSlip { preload, power_ramp, coast_ramp, input: gears, carrier }));
            join(&format!("{pack}.flange_a"), &format!("{left}.flange_b"));
            join(&format!("{pack}.flange_b"), &format!("{right}.flange_b"));
        }
        DifferentialSpec::Viscous { coefficient } => {
            let vc = format!("{name}_viscous");
            e.push(el(&vc, ElementKind::Damper { d: coefficient, phi_rel_start: None, w_rel_start: None }));
            join(&format!("{vc}.flange_a"), &format!("{left}.flange_b"));
            join(&format!("{vc}.flange_b"), &format!("{right}.flange_b"));
        }
        _ => {}
    }
}
