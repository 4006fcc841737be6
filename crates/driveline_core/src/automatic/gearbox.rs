//! Planetary gear trains from tooth counts: the gearbox file format, its validation, the
//! kinematic analysis of every gear, and the network it builds.
//!
//! No gear ratio is stored anywhere. A gear is the set of shift elements closed in it; its ratio
//! is what the Willis equations of the planetary sets, the permanent connections and those
//! closed elements leave: [`GearboxSpec::analyse`] solves the kinematics and reports a gear
//! that leaves the output free (under-constrained) or locks the box (over-constrained).
//!
//! # Members and shafts
//! Each set has members: `Simple` and `DoublePinion`: `sun`, `carrier`, `ring`; `Ravigneaux`:
//! `small_sun` (through the short pinion, a double-pinion path), `large_sun` (meshing the long
//! pinion), `carrier`, `ring`. A member is written `"SET.member"`. A shaft joins members
//! permanently; a member listed in no shaft is a shaft of its own, named like the member. The
//! shaft named `housing` is the case: its members are held. Shift elements connect two shafts
//! (a clutch) or a shaft and `housing` (a brake).
//!
//! # The Willis equations (gearboxes.md 1)
//! ```text
//! simple:        z_S w_S + z_R w_R = (z_S + z_R) w_C
//! double pinion: z_S w_S - z_R w_R = (z_S - z_R) w_C
//! Ravigneaux:    small sun, carrier, ring as a double-pinion set;
//!                large sun, carrier, ring as a simple set
//! ```
//! In the network each relation is an `IdealPlanetary` element: a simple set directly
//! (`ratio = z_R / z_S`); a double-pinion relation as an `IdealPlanetary` whose "carrier"
//! (the member whose speed is the weighted mean of the other two) is the ring and whose "ring"
//! is the carrier, with `ratio = (z_R - z_S) / z_S`. Both write the same linear constraint.
//!
//! # A complete file
//! ```
//! # use driveline_core::automatic::GearboxSpec;
//! let text = r#"
//! Gearbox(
//!     name: "Simpson 3-speed",
//!     sets: [
//!         (name: "F", kind: Simple(sun: 30, ring: 72)),
//!         (name: "B", kind: Simple(sun: 30, ring: 72)),
//!     ],
//!     shafts: [
//!         (name: "input", members: []),
//!         (name: "sun", members: ["F.sun", "B.sun"]),
//!         (name: "output", members: ["F.carrier", "B.ring"]),
//!     ],
//!     input: "input",
//!     output: "output",
//!     elements: [
//!         (name: "forward", connects: ("input", "F.ring")),
//!         (name: "direct", connects: ("input", "sun")),
//!         (name: "band", connects: ("sun", "housing")),
//!         (name: "low_reverse", connects: ("B.carrier", "housing")),
//!     ],
//!     gears: [
//!         ("1", ["forward", "low_reverse"]),
//!         ("2", ["forward", "band"]),
//!         ("3", ["forward", "direct"]),
//!         ("R", ["direct", "low_reverse"]),
//!         ("N", []),
//!     ],
//! )"#;
//! let gb = GearboxSpec::parse(text, "simpson.ron").unwrap();
//! let gears = gb.analyse().unwrap();
//! assert_eq!(format!("{:.4}", gears[0].ratio), "2.4167"); // (102 + 72) / 72
//! ```

use crate::model::{ElementKind, ElementSpec, NetworkSpec};
use crate::scenario::{ScenarioError, position_of, ron_options};
use crate::{Signal, Table1D};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The reserved shaft name of the gearbox case.
pub const HOUSING: &str = "housing";

fn default_mu() -> Table1D {
    Table1D::constant(0.11)
}
fn default_peak() -> f64 {
    1.05
}
fn default_shaft_inertia() -> f64 {
    0.005
}
fn default_surfaces() -> u32 {
    8
}
fn default_outer() -> f64 {
    0.11
}
fn default_inner() -> f64 {
    0.09
}
fn default_area() -> f64 {
    0.006
}
fn default_pressure() -> f64 {
    2.0e6
}
fn default_spring() -> f64 {
    800.0
}
fn default_clearance() -> f64 {
    1.5e-3
}
fn default_fill_flow() -> f64 {
    6.0e-5
}

/// A planetary automatic gearbox: sets, shafts, shift elements, and the elements closed in each
/// gear. See the module docs for the format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename = "Gearbox")]
pub struct GearboxSpec {
    /// Display name.
    pub name: String,
    /// Where the tooth counts and the shift matrix come from.
    #[serde(default)]
    pub source: String,
    /// The planetary sets.
    pub sets: Vec<SetSpec>,
    /// Permanent connections: each shaft joins members rigidly.
    #[serde(default)]
    pub shafts: Vec<ShaftSpec>,
    /// Shaft (or member) driven by the converter turbine.
    pub input: String,
    /// Shaft (or member) driving the final drive.
    pub output: String,
    /// The wet clutches and brakes.
    pub elements: Vec<ShiftElementSpec>,
    /// `(gear, closed elements)`: gears `"1"`, `"2"`, ... forward, `"R"` (or `"R1"`, `"R2"`)
    /// reverse, `"N"` and `"P"` neutral (the park pawl is the controller's business).
    pub gears: Vec<(String, Vec<String>)>,
}

/// One planetary set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetSpec {
    /// Set name (members are `"NAME.sun"`, ...).
    pub name: String,
    /// Kind and tooth counts.
    pub kind: SetKind,
    /// Inertia of each member not joined to a named shaft, kg m^2. Default 0.005.
    #[serde(default = "default_shaft_inertia")]
    pub member_inertia: f64,
}

/// Kinds of planetary sets, with their tooth counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum SetKind {
    /// Sun, single pinions, ring. The pinions have `(ring - sun) / 2` teeth: a whole number.
    Simple {
        /// Sun teeth.
        sun: u32,
        /// Ring teeth.
        ring: u32,
    },
    /// Sun, inner and outer pinions on one carrier, ring.
    DoublePinion {
        /// Sun teeth.
        sun: u32,
        /// Ring teeth.
        ring: u32,
    },
    /// Ravigneaux: small sun (short pinion, double-pinion path), large sun (long pinion),
    /// common carrier and ring.
    Ravigneaux {
        /// Small sun teeth.
        small_sun: u32,
        /// Large sun teeth.
        large_sun: u32,
        /// Ring teeth.
        ring: u32,
    },
}

impl SetKind {
    /// Member names.
    pub fn members(&self) -> &'static [&'static str] {
        match self {
            SetKind::Simple { .. } | SetKind::DoublePinion { .. } => &["sun", "carrier", "ring"],
            SetKind::Ravigneaux { .. } => &["small_sun", "large_sun", "carrier", "ring"],
        }
    }

    /// The Willis relations as `(coefficient, member)` triples with `sum c w = 0`.
    fn relations(&self) -> Vec<[(f64, &'static str); 3]> {
        let simple = |s: u32, r: u32, sun: &'static str| {
            let (s, r) = (s as f64, r as f64);
            [(s, sun), (r, "ring"), (-(s + r), "carrier")]
        };
        let double = |s: u32, r: u32, sun: &'static str| {
            let (s, r) = (s as f64, r as f64);
            [(s, sun), (-r, "ring"), (-(s - r), "carrier")]
        };
        match *self {
            SetKind::Simple { sun, ring } => vec![simple(sun, ring, "sun")],
            SetKind::DoublePinion { sun, ring } => vec![double(sun, ring, "sun")],
            SetKind::Ravigneaux { small_sun, large_sun, ring } => {
                vec![double(small_sun, ring, "small_sun"), simple(large_sun, ring, "large_sun")]
            }
        }
    }
}

/// A rigid shaft joining members.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShaftSpec {
    /// Shaft name (`housing` is the case).
    pub name: String,
    /// Members joined, `"SET.member"`.
    pub members: Vec<String>,
    /// Inertia of the shaft with its members, kg m^2 (> 0). Default 0.005.
    #[serde(default = "default_shaft_inertia")]
    pub inertia: f64,
}

/// A wet multi-plate clutch (between two shafts) or brake (a shaft to `housing`) with its
/// hydraulic piston. Torque capacity `mu cgeo F_n` with `cgeo = N (r_o + r_i) / 2` and
/// `F_n = A p - F_spring` once the clearance is taken up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShiftElementSpec {
    /// Element name (as in the shift matrix).
    pub name: String,
    /// The two shafts or members joined; `housing` as the second makes a brake.
    pub connects: (String, String),
    /// Friction coefficient over slip speed (rad/s), wet: 0.05..0.15. Default 0.11.
    #[serde(default = "default_mu")]
    pub mu: Table1D,
    /// Static over kinetic friction, >= 1. Default 1.05 (wet materials are made flat).
    #[serde(default = "default_peak")]
    pub peak: f64,
    /// Friction surfaces N (two per friction plate). Default 8.
    #[serde(default = "default_surfaces")]
    pub surfaces: u32,
    /// Outer friction radius, m. Default 0.11.
    #[serde(default = "default_outer")]
    pub outer_radius: f64,
    /// Inner friction radius, m. Default 0.09.
    #[serde(default = "default_inner")]
    pub inner_radius: f64,
    /// Piston area, m^2. Default 0.006.
    #[serde(default = "default_area")]
    pub piston_area: f64,
    /// Line pressure at full apply, Pa. Default 2.0e6 (20 bar).
    #[serde(default = "default_pressure")]
    pub max_pressure: f64,
    /// Return spring force at the applied position, N (the piston moves from
    /// `p = F_spring / A`). Default 800.
    #[serde(default = "default_spring")]
    pub return_spring: f64,
    /// Pack clearance the piston takes up before the plates touch, m. Default 1.5e-3.
    #[serde(default = "default_clearance")]
    pub clearance: f64,
    /// Oil flow into the piston chamber while filling, m^3/s. Default 6e-5 (fill time
    /// `A clearance / flow`: 0.15 s with the defaults).
    #[serde(default = "default_fill_flow")]
    pub fill_flow: f64,
}

impl ShiftElementSpec {
    /// Geometry factor `N (r_o + r_i) / 2`, m.
    pub fn cgeo(&self) -> f64 {
        self.surfaces as f64 * (self.outer_radius + self.inner_radius) / 2.0
    }
    /// Clamp force at full pressure, N.
    pub fn max_force(&self) -> f64 {
        self.piston_area * self.max_pressure - self.return_spring
    }
    /// Kinetic torque capacity at full pressure and zero slip, N m.
    pub fn capacity(&self) -> f64 {
        self.mu.eval(0.0) * self.cgeo() * self.max_force()
    }
    /// Time to take up the clearance at the fill flow, s.
    pub fn fill_time(&self) -> f64 {
        self.piston_area * self.clearance / self.fill_flow
    }
}

/// A gearbox file error: what is wrong, and where to point in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct GearboxError {
    /// Text to find in the file (a quoted name), if any.
    pub near: Option<String>,
    /// Key to point at after `near`, if any.
    pub key: Option<&'static str>,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl std::fmt::Display for GearboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn gerr(near: Option<&str>, key: Option<&'static str>, message: String) -> GearboxError {
    GearboxError { near: near.map(|n| format!("\"{n}\"")), key, message }
}

/// One gear as the kinematics give it.
#[derive(Debug, Clone, PartialEq)]
pub struct GearInfo {
    /// Gear name.
    pub name: String,
    /// Indices of the closed elements.
    pub closed: Vec<usize>,
    /// Input speed / output speed (negative in reverse); 0 for neutral.
    pub ratio: f64,
    /// Neutral: the output turns freely with the input held.
    pub neutral: bool,
    /// Speed of every shaft per unit input speed (0 for neutral), in [`GearboxSpec::shafts_resolved`] order.
    pub speeds: Vec<f64>,
    /// Torque each closed element carries per unit input torque (same order as `closed`), from
    /// the static balance of the massless gear train; signed as `w_a - w_b` would be driven.
    pub torque_factors: Vec<f64>,
}

/// A shaft after resolving: name, members, inertia, held.
#[derive(Debug, Clone, PartialEq)]
pub struct Shaft {
    /// Name.
    pub name: String,
    /// Members joined.
    pub members: Vec<String>,
    /// Inertia, kg m^2.
    pub inertia: f64,
}

impl Shaft {
    /// Name of the shaft's Inertia element: the shaft name with `.` (in implicit member
    /// shafts, `SET.member`) replaced by `_`.
    pub fn element_name(&self) -> String {
        self.name.replace('.', "_")
    }
}

impl GearboxSpec {
    /// Parses gearbox text; errors carry `file:line:col`.
    pub fn parse(text: &str, file: &str) -> Result<GearboxSpec, ScenarioError> {
        Self::parse_analysed(text, file).map(|(spec, _)| spec)
    }

    /// Parses gearbox text and returns it with its analysed gears (see
    /// [`GearboxSpec::analyse`]); errors carry `file:line:col`.
    pub fn parse_analysed(text: &str, file: &str) -> Result<(GearboxSpec, Vec<GearInfo>), ScenarioError> {
        let spec: GearboxSpec = ron_options().from_str(text).map_err(|e| ScenarioError {
            file: file.to_string(),
            line: e.span.start.line,
            col: e.span.start.col,
            message: format!("{} (see the gearbox format in the driveline_core::automatic::gearbox docs)", e.code),
        })?;
        let gears = spec.analyse().map_err(|e| locate(text, file, &e))?;
        Ok((spec, gears))
    }

    /// Reads, parses and checks a gearbox file.
    pub fn load(path: &Path) -> Result<GearboxSpec, ScenarioError> {
        Self::load_analysed(path).map(|(spec, _)| spec)
    }

    /// Reads, parses and checks a gearbox file; returns it with its analysed gears.
    pub fn load_analysed(path: &Path) -> Result<(GearboxSpec, Vec<GearInfo>), ScenarioError> {
        let (file, text) = crate::scenario::read(path)?;
        Self::parse_analysed(&text, &file)
    }

    /// The shafts: the named ones (housing excluded), then one per member listed in none.
    pub fn shafts_resolved(&self) -> Vec<Shaft> {
        let mut out: Vec<Shaft> = self
            .shafts
            .iter()
            .filter(|s| s.name != HOUSING)
            .map(|s| Shaft { name: s.name.clone(), members: s.members.clone(), inertia: s.inertia })
            .collect();
        for set in &self.sets {
            for m in set.kind.members() {
                let full = format!("{}.{m}", set.name);
                if !self.shafts.iter().any(|s| s.members.contains(&full)) {
                    out.push(Shaft { name: full.clone(), members: vec![full], inertia: set.member_inertia });
                }
            }
        }
        out
    }

    /// Shaft index of a shaft or member name; `None` for the housing.
    fn shaft_of(&self, shafts: &[Shaft], name: &str) -> Result<Option<usize>, String> {
        if name == HOUSING || self.shafts.iter().any(|s| s.name == HOUSING && s.members.iter().any(|m| m == name)) {
            return Ok(None);
        }
        shafts.iter().position(|s| s.name == name || s.members.iter().any(|m| m == name)).map(Some).ok_or_else(|| {
            format!("`{name}` is neither a shaft nor a member (members are SET.sun, SET.carrier, SET.ring, ...)")
        })
    }

    /// Checks the file and solves the kinematics of every gear.
    pub fn analyse(&self) -> Result<Vec<GearInfo>, GearboxError> {
        self.check_parts()?;
        let shafts = self.shafts_resolved();
        let n = shafts.len();
        let idx = |name: &str| self.shaft_of(&shafts, name).expect("checked");
        // Permanent rows: the Willis relations.
        let mut base: Vec<Vec<f64>> = Vec::new();
        for set in &self.sets {
            for rel in set.kind.relations() {
                let mut row = vec![0.0; n];
                for (c, m) in rel {
                    if let Some(k) = idx(&format!("{}.{m}", set.name)) {
                        row[k] += c;
                    }
                }
                base.push(row);
            }
        }
        let unit = |k: usize| {
            let mut r = vec![0.0; n];
            r[k] = 1.0;
            r
        };
        let input =
            idx(&self.input).ok_or_else(|| gerr(None, Some("input"), "the input cannot be the housing".into()))?;
        let output =
            idx(&self.output).ok_or_else(|| gerr(None, Some("output"), "the output cannot be the housing".into()))?;
        if input == output {
            return Err(gerr(None, Some("output"), "input and output are the same shaft".into()));
        }
        let element_row = |e: &ShiftElementSpec| {
            let (a, b) = (idx(&e.connects.0), idx(&e.connects.1));
            let mut r = vec![0.0; n];
            if let Some(a) = a {
                r[a] += 1.0;
            }
            if let Some(b) = b {
                r[b] -= 1.0;
            }
            r
        };
        let mut out = Vec::new();
        for (gear, closed) in &self.gears {
            let mut rows = base.clone();
            let mut ids = Vec::new();
            for c in closed {
                let k = self.elements.iter().position(|e| &e.name == c).expect("checked");
                ids.push(k);
                rows.push(element_row(&self.elements[k]));
            }
            let neutral = gear == "N" || gear == "P";
            let null = null_space(&rows, n);
            let names: Vec<&str> = closed.iter().map(String::as_str).collect();
            if neutral {
                // With the input held, the output must still be free.
                let mut held = rows.clone();
                held.push(unit(input));
                if null_space(&held, n).iter().all(|v| v[output].abs() < 1e-9) {
                    return Err(gerr(
                        Some(gear),
                        None,
                        format!(
                            "neutral `{gear}` ties the output to the input or the housing with {names:?} closed; neutral must leave the output free"
                        ),
                    ));
                }
                out.push(GearInfo {
                    name: gear.clone(),
                    closed: ids,
                    ratio: 0.0,
                    neutral: true,
                    speeds: vec![0.0; n],
                    torque_factors: Vec::new(),
                });
                continue;
            }
            match null.len() {
                0 => {
                    return Err(gerr(
                        Some(gear),
                        None,
                        format!(
                            "gear `{gear}` is over-constrained: closing {names:?} locks the gearbox (the closed elements demand two different ratios)"
                        ),
                    ));
                }
                1 => {}
                k => {
                    return Err(gerr(
                        Some(gear),
                        None,
                        format!(
                            "gear `{gear}` is under-constrained: closing {names:?} leaves {k} degrees of freedom, so the output is not tied to the input; a gear needs exactly one"
                        ),
                    ));
                }
            }
            let v = &null[0];
            if v[output].abs() < 1e-9 || v[input].abs() < 1e-9 {
                let which = if v[output].abs() < 1e-9 { "the output is held" } else { "the input is held" };
                return Err(gerr(Some(gear), None, format!("gear `{gear}`: {which} with {names:?} closed")));
            }
            let ratio = v[input] / v[output];
            let reverse = gear.starts_with('R');
            if reverse != (ratio < 0.0) {
                return Err(gerr(
                    Some(gear),
                    None,
                    format!(
                        "gear `{gear}` has ratio {ratio:.4}: {} gears must turn the output {}",
                        if reverse { "reverse" } else { "forward" },
                        if reverse { "backwards (ratio < 0)" } else { "forwards (ratio > 0)" }
                    ),
                ));
            }
            let speeds = v.iter().map(|x| x / v[input]).collect();
            // Static balance A^T lambda + f = 0 with 1 N m in and -ratio N m out.
            let mut f = vec![0.0; n];
            f[input] = 1.0;
            f[output] = -ratio;
            let lam = balance(&rows, &f);
            let torque_factors = lam[base.len()..].to_vec();
            out.push(GearInfo { name: gear.clone(), closed: ids, ratio, neutral: false, speeds, torque_factors });
        }
        Ok(out)
    }

    fn check_parts(&self) -> Result<(), GearboxError> {
        let mut names = UniqueNames::default();
        self.check_sets(&mut names)?;
        let shafts = self.check_shafts(&mut names)?;
        self.check_elements(&mut names, &shafts)?;
        self.check_gears()
    }

    /// The planetary sets: at least one, names unique, teeth that fit, member inertias > 0.
    fn check_sets(&self, names: &mut UniqueNames) -> Result<(), GearboxError> {
        if self.sets.is_empty() {
            return Err(gerr(None, Some("sets"), "`sets` is empty; a planetary gearbox has at least one set".into()));
        }
        for set in &self.sets {
            names.unique(&set.name)?;
            let teeth = |t: u32, what: &str| -> Result<(), GearboxError> {
                if t < 8 {
                    return Err(gerr(
                        Some(&set.name),
                        None,
                        format!("set `{}`: {what} has {t} teeth; a gear needs at least 8", set.name),
                    ));
                }
                Ok(())
            };
            let ring_above = |s: u32, r: u32, what: &str| -> Result<(), GearboxError> {
                if r <= s {
                    return Err(gerr(
                        Some(&set.name),
                        None,
                        format!("set `{}`: the ring ({r} teeth) must be larger than the {what} ({s})", set.name),
                    ));
                }
                Ok(())
            };
            match set.kind {
                SetKind::Simple { sun, ring } => {
                    teeth(sun, "the sun")?;
                    teeth(ring, "the ring")?;
                    ring_above(sun, ring, "sun")?;
                    if (ring - sun) % 2 != 0 {
                        return Err(gerr(
                            Some(&set.name),
                            None,
                            format!(
                                "set `{}`: the teeth do not fit: planets need (ring - sun) / 2 = ({ring} - {sun}) / 2 = {} teeth, a whole number",
                                set.name,
                                (ring - sun) as f64 / 2.0
                            ),
                        ));
                    }
                    if (ring - sun) / 2 < 8 {
                        return Err(gerr(
                            Some(&set.name),
                            None,
                            format!(
                                "set `{}`: the planets would have {} teeth; at least 8",
                                set.name,
                                (ring - sun) / 2
                            ),
                        ));
                    }
                }
                SetKind::DoublePinion { sun, ring } => {
                    teeth(sun, "the sun")?;
                    teeth(ring, "the ring")?;
                    ring_above(sun, ring, "sun")?;
                }
                SetKind::Ravigneaux { small_sun, large_sun, ring } => {
                    teeth(small_sun, "the small sun")?;
                    teeth(large_sun, "the large sun")?;
                    ring_above(small_sun, ring, "small sun")?;
                    ring_above(large_sun, ring, "large sun")?;
                }
            }
            if !(set.member_inertia.is_finite() && set.member_inertia > 0.0 && set.member_inertia <= 10.0) {
                return Err(gerr(
                    Some(&set.name),
                    Some("member_inertia"),
                    format!("`member_inertia` is {}; it must be in (0, 10] kg m^2", set.member_inertia),
                ));
            }
        }
        Ok(())
    }

    /// The shafts (members of the sets, each listed once, inertias > 0) and the input and
    /// output shafts. Returns the shafts resolved.
    fn check_shafts(&self, names: &mut UniqueNames) -> Result<Vec<Shaft>, GearboxError> {
        let all_members: Vec<String> =
            self.sets.iter().flat_map(|s| s.kind.members().iter().map(move |m| format!("{}.{m}", s.name))).collect();
        let mut seen: Vec<&str> = Vec::new();
        for sh in &self.shafts {
            if sh.name != HOUSING {
                names.unique(&sh.name)?;
            }
            if !(sh.inertia.is_finite() && sh.inertia > 0.0 && sh.inertia <= 10.0) {
                return Err(gerr(
                    Some(&sh.name),
                    Some("inertia"),
                    format!("shaft `{}`: `inertia` is {}; it must be in (0, 10] kg m^2", sh.name, sh.inertia),
                ));
            }
            for m in &sh.members {
                if !all_members.contains(m) {
                    return Err(gerr(
                        Some(m),
                        None,
                        format!(
                            "shaft `{}`: `{m}` is not a member of any set (members: {})",
                            sh.name,
                            all_members.join(", ")
                        ),
                    ));
                }
                if seen.contains(&m.as_str()) {
                    return Err(gerr(
                        Some(m),
                        None,
                        format!("`{m}` is listed in two shafts; list every member once (one shaft joins them all)"),
                    ));
                }
                seen.push(m);
            }
        }
        let shafts = self.shafts_resolved();
        for (key, name) in [("input", &self.input), ("output", &self.output)] {
            self.shaft_of(&shafts, name).map_err(|m| gerr(None, Some(key), format!("`{key}`: {m}")))?;
        }
        Ok(shafts)
    }

    /// The clutches and brakes: at least one, each joining two shafts, with friction, geometry
    /// and piston parameters in range.
    fn check_elements(&self, names: &mut UniqueNames, shafts: &[Shaft]) -> Result<(), GearboxError> {
        if self.elements.is_empty() {
            return Err(gerr(None, Some("elements"), "`elements` is empty; give the clutches and brakes".into()));
        }
        for e in &self.elements {
            names.unique(&e.name)?;
            let a = self.shaft_of(shafts, &e.connects.0).map_err(|m| gerr(Some(&e.name), None, m))?;
            let b = self.shaft_of(shafts, &e.connects.1).map_err(|m| gerr(Some(&e.name), None, m))?;
            if a == b {
                return Err(gerr(
                    Some(&e.name),
                    Some("connects"),
                    format!(
                        "element `{}` connects `{}` to itself (`{}` and `{}` are the same shaft); it would never slip or carry torque",
                        e.name,
                        if a.is_none() { HOUSING } else { &e.connects.0 },
                        e.connects.0,
                        e.connects.1
                    ),
                ));
            }
            let p = |key: &'static str, v: f64| -> Result<(), GearboxError> {
                if !(v.is_finite() && v > 0.0) {
                    return Err(gerr(
                        Some(&e.name),
                        Some(key),
                        format!("element `{}`: `{key}` is {v}; it must be > 0", e.name),
                    ));
                }
                match crate::limits::outside(key, v) {
                    Some(range) => Err(gerr(
                        Some(&e.name),
                        Some(key),
                        format!("element `{}`: `{key}` is {v}; it must be {range}", e.name),
                    )),
                    None => Ok(()),
                }
            };
            e.mu.validate().map_err(|m| gerr(Some(&e.name), Some("mu"), format!("`mu`: {m}")))?;
            if e.mu.points()[0].0 != 0.0 || e.mu.y_range().0 < 0.0 {
                return Err(gerr(Some(&e.name), Some("mu"), "`mu` must start at slip 0 with values >= 0".into()));
            }
            if let Some(why) = crate::limits::table_outside(e.mu.points(), 1e4, 10.0) {
                return Err(gerr(Some(&e.name), Some("mu"), format!("`mu` (rad/s, friction coefficient): {why}")));
            }
            if !(e.peak.is_finite() && e.peak >= 1.0) {
                return Err(gerr(Some(&e.name), Some("peak"), format!("`peak` is {}; it must be >= 1", e.peak)));
            }
            if e.surfaces == 0 {
                return Err(gerr(Some(&e.name), Some("surfaces"), "`surfaces` is 0; at least one".into()));
            }
            p("outer_radius", e.outer_radius)?;
            p("inner_radius", e.inner_radius)?;
            if e.inner_radius >= e.outer_radius {
                return Err(gerr(
                    Some(&e.name),
                    Some("inner_radius"),
                    format!("`inner_radius` {} must be below `outer_radius` {}", e.inner_radius, e.outer_radius),
                ));
            }
            p("piston_area", e.piston_area)?;
            p("max_pressure", e.max_pressure)?;
            p("clearance", e.clearance)?;
            p("fill_flow", e.fill_flow)?;
            if !(e.return_spring.is_finite() && e.return_spring >= 0.0 && e.max_force() > 0.0) {
                return Err(gerr(
                    Some(&e.name),
                    Some("return_spring"),
                    format!(
                        "`return_spring` {} N must be >= 0 and below the piston force at full pressure ({} N)",
                        e.return_spring,
                        e.piston_area * e.max_pressure
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The shift matrix: gears named 1, 2, ... (in order), R.., N or P, each closing elements
    /// that exist, each once.
    fn check_gears(&self) -> Result<(), GearboxError> {
        if self.gears.is_empty() {
            return Err(gerr(None, Some("gears"), "`gears` is empty; give the shift matrix".into()));
        }
        let mut gear_names: Vec<&str> = Vec::new();
        for (g, closed) in &self.gears {
            let ok = g == "N" || g == "P" || g.parse::<u32>().is_ok_and(|k| k >= 1) || g.starts_with('R');
            if !ok {
                return Err(gerr(
                    Some(g),
                    None,
                    format!("gear `{g}`: gears are named 1, 2, ... (forward), R, R1, R2 (reverse), N or P"),
                ));
            }
            if gear_names.contains(&g.as_str()) {
                return Err(gerr(Some(g), None, format!("gear `{g}` is listed twice")));
            }
            gear_names.push(g);
            for c in closed {
                if !self.elements.iter().any(|e| &e.name == c) {
                    return Err(gerr(
                        Some(g),
                        None,
                        format!(
                            "gear `{g}` closes `{c}`, which is not an element (elements: {})",
                            self.elements.iter().map(|e| e.name.as_str()).collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
                if closed.iter().filter(|x| *x == c).count() > 1 {
                    return Err(gerr(Some(g), None, format!("gear `{g}` lists `{c}` twice")));
                }
            }
        }
        let forward: Vec<u32> = self.gears.iter().filter_map(|(g, _)| g.parse::<u32>().ok()).collect();
        for (k, &g) in forward.iter().enumerate() {
            if g != k as u32 + 1 {
                return Err(gerr(
                    None,
                    Some("gears"),
                    format!("forward gears must be listed as 1, 2, 3, ... in order; found `{g}` in place {}", k + 1),
                ));
            }
        }
        if forward.is_empty() {
            return Err(gerr(None, Some("gears"), "no forward gear (`1`, `2`, ...)".into()));
        }
        Ok(())
    }

    /// Forward gears in order, then reverse gears, as analysed (neutral gears excluded).
    pub fn driving_gears(gears: &[GearInfo]) -> impl Iterator<Item = &GearInfo> {
        gears.iter().filter(|g| !g.neutral)
    }

    /// Builds the gearbox, at rest, as network elements named `{prefix}{shaft}`, `{prefix}{set}`,
    /// `{prefix}{element}`; each element's normalised clamp force is the run-time input
    /// `{prefix}{element}.force`. Returns the elements, the connections, and the input and
    /// output flanges to join to the rest of the driveline.
    pub fn build(&self, prefix: &str) -> (Vec<ElementSpec>, Vec<(String, String)>, String, String) {
        let shafts = self.shafts_resolved();
        // The flange a shaft (or the housing, `None`) is joined at.
        let flange = |k: Option<usize>| match k {
            Some(k) => format!("{prefix}{}.flange_a", shafts[k].element_name()),
            None => format!("{prefix}{HOUSING}.flange"),
        };
        let node = |name: &str| flange(self.shaft_of(&shafts, name).expect("checked"));
        let mut e = Vec::new();
        let mut c = Vec::new();
        for s in &shafts {
            e.push(ElementSpec {
                name: format!("{prefix}{}", s.element_name()),
                // At rest: consistent with every Willis relation and any closed element.
                kind: ElementKind::Inertia { J: s.inertia, phi_start: Some(0.0), w_start: Some(0.0) },
            });
        }
        for set in &self.sets {
            let m = |member: &str| node(&format!("{}.{member}", set.name));
            let mut planetary = |name: String, ratio: f64, sun: String, carrier: String, ring: String| {
                e.push(ElementSpec { name: name.clone(), kind: ElementKind::IdealPlanetary { ratio } });
                c.push((format!("{name}.sun"), sun));
                c.push((format!("{name}.carrier"), carrier));
                c.push((format!("{name}.ring"), ring));
            };
            let tag = format!("{prefix}{}", set.name);
            match set.kind {
                SetKind::Simple { sun, ring } => {
                    planetary(tag, ring as f64 / sun as f64, m("sun"), m("carrier"), m("ring"));
                }
                SetKind::DoublePinion { sun, ring } => {
                    // The ring's speed is the weighted mean of sun and carrier.
                    planetary(tag, (ring - sun) as f64 / sun as f64, m("sun"), m("ring"), m("carrier"));
                }
                SetKind::Ravigneaux { small_sun, large_sun, ring } => {
                    planetary(
                        format!("{tag}_short"),
                        (ring - small_sun) as f64 / small_sun as f64,
                        m("small_sun"),
                        m("ring"),
                        m("carrier"),
                    );
                    planetary(
                        format!("{tag}_long"),
                        ring as f64 / large_sun as f64,
                        m("large_sun"),
                        m("carrier"),
                        m("ring"),
                    );
                }
            }
        }
        for el in &self.elements {
            let a = self.shaft_of(&shafts, &el.connects.0).expect("checked");
            let b = self.shaft_of(&shafts, &el.connects.1).expect("checked");
            let name = format!("{prefix}{}", el.name);
            let force = Signal::Input { name: format!("{name}.force"), value: 0.0, rate: 0.0, since: 0.0 };
            let (mu_pos, peak, cgeo, fn_max) = (el.mu.clone(), el.peak, el.cgeo(), el.max_force());
            match (a, b) {
                (Some(a), Some(b)) => {
                    e.push(ElementSpec {
                        name: name.clone(),
                        kind: ElementKind::Clutch {
                            mu_pos,
                            peak,
                            cgeo,
                            fn_max,
                            f_normalized: force,
                            phi_rel_start: None,
                            w_rel_start: None,
                        },
                    });
                    c.push((format!("{name}.flange_a"), flange(Some(a))));
                    c.push((format!("{name}.flange_b"), flange(Some(b))));
                }
                (Some(k), None) | (None, Some(k)) => {
                    e.push(ElementSpec {
                        name: name.clone(),
                        kind: ElementKind::Brake {
                            mu_pos,
                            peak,
                            cgeo,
                            fn_max,
                            f_normalized: force,
                            use_support: false,
                        },
                    });
                    c.push((format!("{name}.flange_a"), flange(Some(k))));
                }
                (None, None) => unreachable!("checked: an element joins two different shafts"),
            }
        }
        // Members held by the case meet at a Fixed element; brakes react on the ground directly.
        let housing = flange(None);
        if c.iter().any(|(_, b)| *b == housing) {
            e.push(ElementSpec { name: format!("{prefix}{HOUSING}"), kind: ElementKind::Fixed { phi0: 0.0 } });
        }
        let input = node(&self.input);
        let output = node(&self.output);
        (e, c, input, output)
    }

    /// The gearbox alone as a network (for analysis tools and tests).
    pub fn network(&self, prefix: &str) -> NetworkSpec {
        let (elements, connections, _, _) = self.build(prefix);
        NetworkSpec { elements, connections }
    }
}

/// Places a gearbox error in the file text.
pub(crate) fn locate(text: &str, file: &str, e: &GearboxError) -> ScenarioError {
    let mut pos = (1, 1);
    let mut from = 0;
    if let Some(n) = &e.near
        && let Some((l, c, at)) = position_of(text, n, 0)
    {
        pos = (l, c);
        from = at;
    }
    if let Some(k) = e.key
        && let Some((l, c, _)) = position_of(text, &format!("{k}:"), from)
    {
        pos = (l, c);
    }
    ScenarioError { file: file.to_string(), line: pos.0, col: pos.1, message: e.message.clone() }
}

/// Multipliers `lambda` with `A^T lambda = -f`: the minimum-norm solution of the normal
/// equations `(A A^T + eps I) lambda = -A f` (eps only splits redundant rows evenly).
fn balance(rows: &[Vec<f64>], f: &[f64]) -> Vec<f64> {
    let m = rows.len();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let mut a: Vec<Vec<f64>> = (0..m).map(|i| (0..m).map(|j| dot(&rows[i], &rows[j])).collect()).collect();
    let mut b: Vec<f64> = rows.iter().map(|r| -dot(r, f)).collect();
    let eps = 1e-12 * a.iter().enumerate().map(|(i, r)| r[i]).fold(1.0, f64::max);
    for (i, r) in a.iter_mut().enumerate() {
        r[i] += eps;
    }
    // Symmetric positive definite: Gaussian elimination without pivoting is stable.
    for k in 0..m {
        for i in k + 1..m {
            let q = a[i][k] / a[k][k];
            for j in k..m {
                a[i][j] -= q * a[k][j];
            }
            b[i] -= q * b[k];
        }
    }
    let mut x = vec![0.0; m];
    for k in (0..m).rev() {
        let s: f64 = (k + 1..m).map(|j| a[k][j] * x[j]).sum();
        x[k] = (b[k] - s) / a[k][k];
    }
    x
}

/// Orthonormal-free basis of the null space of `rows` (each of length `n`) by Gauss-Jordan
/// elimination with partial pivoting; entries below `1e-10` of the row scale count as zero.
pub fn null_space(rows: &[Vec<f64>], n: usize) -> Vec<Vec<f64>> {
    let mut m: Vec<Vec<f64>> = rows.to_vec();
    let scale = m.iter().flatten().fold(0.0f64, |a, x| a.max(x.abs())).max(1.0);
    let tol = 1e-10 * scale;
    let mut pivots = Vec::new();
    let mut r = 0;
    for col in 0..n {
        if r == m.len() {
            break;
        }
        let (best, val) =
            (r..m.len()).map(|i| (i, m[i][col].abs())).fold((r, 0.0), |a, b| if b.1 > a.1 { b } else { a });
        if val <= tol {
            continue;
        }
        m.swap(r, best);
        let p = m[r][col];
        for x in m[r].iter_mut() {
            *x /= p;
        }
        for i in 0..m.len() {
            if i != r && m[i][col] != 0.0 {
                let f = m[i][col];
                for j in 0..n {
                    m[i][j] -= f * m[r][j];
                }
            }
        }
        pivots.push(col);
        r += 1;
    }
    let free: Vec<usize> = (0..n).filter(|c| !pivots.contains(c)).collect();
    free.iter()
        .map(|&f| {
            let mut v = vec![0.0; n];
            v[f] = 1.0;
            for (i, &pc) in pivots.iter().enumerate() {
                v[pc] = -m[i][f];
            }
            v
        })
        .collect()
}

/// The names of a gearbox's sets, shafts and elements seen so far: each must be unique.
#[derive(Default)]
struct UniqueNames(Vec<String>);

impl UniqueNames {
    /// Takes `n` as a name: non-empty, without `.`, not `housing`, not seen before.
    fn unique(&mut self, n: &str) -> Result<(), GearboxError> {
        if n.is_empty() || n.contains('.') || n == HOUSING {
            return Err(gerr(
                Some(n),
                None,
                format!("name `{n}` is not allowed: names are non-empty, without `.`, and not `housing`"),
            ));
        }
        if self.0.iter().any(|x| x == n) {
            return Err(gerr(Some(n), None, format!("the name `{n}` is used twice")));
        }
        self.0.push(n.to_string());
        Ok(())
    }
}
