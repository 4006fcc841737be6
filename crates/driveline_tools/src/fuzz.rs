//! The fuzz harness: a stable-Rust fuzzer of our own, deterministic by seed.
//!
//! Every case is one execution, drawn from its own generator (`seed` and the case number), so
//! a case found by a long run replays alone (`fuzz --seed S --case N`). Kinds of case:
//!
//! - **mutated file**: a shipped scenario, vehicle or gearbox file (a gearbox goes into the 8HP
//!   sedan) with one to three mutations (a number replaced by an extreme or scaled one, a line
//!   dropped or doubled, two numbers swapped, the text cut short), checked as `driveline check`
//!   checks it; when accepted, run for up to 40 steps of random inputs and step sizes;
//! - **random network**: a scenario written from parts (a chain of inertias joined by gears,
//!   springs, dampers, clutches, brakes, one-way clutches and backlash, driven by sources), its
//!   parameters drawn over their ranges and past them, checked and run as above;
//! - **vehicle inputs**: a shipped vehicle (a copy, from a state part-way through a launch) fed
//!   40 steps of random driver inputs (NaN, infinities, huge values included), odd step sizes
//!   (0, negative, NaN, 1e-300, 10 s) and snapshot/restore round trips;
//! - **scenario inputs**: a shipped scenario's run-time inputs set to random values mid-run.
//!
//! A case fails on a panic, a non-finite output (a finite step leaving a NaN or infinite
//! state or telemetry), a file `check` accepts whose run then fails (what `check` accepts must
//! run), a restored snapshot that does not continue as the original did, or a case slower than
//! [`SLOW`]. A network whose motion itself runs to infinity in finite time (a quadratic
//! speed-dependent torque that drives: `w' = k w^2` reaches infinity at `t = 1 / (k w0)`) ends
//! in a typed error as it should: the failing step is taken again in finer pieces, and when
//! the motion grows a millionfold there with the energy ledger closed (the sources do the
//! work), the case counts as a blow-up ([`Report::blowups`]), not as a failure.

use driveline_core::automatic::{GearboxSource, GearboxSpec, Selector};
use driveline_core::{DriverInput, Scenario, Simulation, StepError, Vehicle, VehicleSpec};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A case that takes longer than this is a finding (a normal case takes about a millisecond).
pub const SLOW: Duration = Duration::from_secs(2);
/// A case still running after this is a hang: the run prints it and stops (exit code 3).
pub const HANG: Duration = Duration::from_secs(30);

/// Pieces the failing step of an accepted network is taken again in, to tell a blow-up of the
/// motion itself from a failure of the step ([`Report::blowups`]).
pub const BLOWUP_PIECES: usize = 1000;
/// How many times its start (plus one) the fastest speed must grow in the finer steps, with
/// the energy ledger closed, to count as a blow-up.
pub const BLOWUP_GROWTH: f64 = 1e6;

/// SplitMix64: small, fast, and the same on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The generator of case `index` of run `seed`.
    pub fn for_case(seed: u64, index: u64) -> Self {
        let mut r = Rng(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        r.bits();
        r
    }
    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.bits() % n as u64) as usize
    }
    /// A number in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.bits() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    /// A value a user might type by mistake or on purpose: extremes, signs, scales.
    pub fn nasty(&mut self, around: f64) -> f64 {
        match self.below(16) {
            0 => 0.0,
            1 => -around,
            2 => around * 1e6,
            3 => around * 1e-6,
            4 => 1e300,
            5 => -1e300,
            6 => 1e-300,
            7 => 4294967296.0,
            8 => 1e30,
            9 => -1.0,
            10 => around * (0.5 + self.unit()),
            11 => around * 10f64.powf(self.unit() * 8.0 - 4.0),
            12 => f64::NAN,
            13 => f64::INFINITY,
            14 => f64::NEG_INFINITY,
            _ => (self.unit() - 0.5) * 10f64.powi(self.below(40) as i32 - 20),
        }
    }
    /// A step size: mostly sensible, sometimes absurd.
    pub fn step_size(&mut self) -> f64 {
        match self.below(400) {
            0..=3 => 0.0,
            4..=7 => -1e-3,
            8..=11 => f64::NAN,
            12..=15 => 1e-300,
            16 => 10.0,
            17..=20 => f64::INFINITY,
            21..=24 => 1e-7,
            25..=29 => 0.2,
            30..=199 => 1.0 / 60.0,
            200..=299 => 1e-3,
            _ => 10f64.powf(-4.0 + 3.0 * self.unit()),
        }
    }
}

/// What went wrong in a case.
#[derive(Debug, Clone, PartialEq)]
pub enum Defect {
    /// A panic, with its message.
    Panic(String),
    /// A finite step left something non-finite.
    NonFinite(String),
    /// `check` accepted the file and its run failed.
    AcceptedButFails(String),
    /// A restored snapshot did not continue as the original.
    Snapshot(String),
    /// A vehicle's motion ran away past anything physical (faster than 1,000 m/s at a step's
    /// end or on average over it, a wheel or the engine past 100,000 rad/s): a step that
    /// diverged without a non-finite value.
    Diverged(String),
    /// The case took this long, s.
    Slow(f64),
}

/// A failed case: enough to replay it.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The case number (replay with the same seed).
    pub case: u64,
    /// The kind of case and its file.
    pub what: String,
    /// What went wrong.
    pub defect: Defect,
}

/// The totals of a run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Cases run.
    pub executions: u64,
    /// Files `check` rejected (with an error, as it should).
    pub rejected: u64,
    /// Files `check` accepted (then run).
    pub accepted: u64,
    /// Steps taken in all.
    pub steps: u64,
    /// Failed cases (the first 100).
    pub findings: Vec<Finding>,
    /// Failed cases in all.
    pub failed: u64,
    /// Of those, files `check` accepted whose run then stopped with a typed step error (the
    /// state left as it was) that is not a blow-up of the motion itself: what the plausible
    /// ranges do not yet rule out.
    pub errors_after_check: u64,
    /// Accepted networks whose motion runs to infinity in finite time (a quadratic
    /// speed-dependent torque that drives, `w' = k w^2`): the failing step, taken again from
    /// its start in finer pieces, grows a million times with the energy ledger closed (see
    /// `blows_up`). A typed error is the right end of such a run; counted, not a finding.
    pub blowups: u64,
    /// Failed cases by kind: panics, non-finite outputs, runaways, snapshot mismatches, slow.
    pub panics: u64,
    /// See [`Report::panics`].
    pub non_finite: u64,
    /// See [`Report::panics`].
    pub diverged: u64,
    /// See [`Report::panics`].
    pub snapshot: u64,
    /// See [`Report::panics`].
    pub slow: u64,
    /// Wall time, s.
    pub seconds: f64,
}

/// The shipped files and built models every case starts from.
pub struct Corpus {
    files: Vec<(PathBuf, String)>,
    gearboxes: Vec<(PathBuf, String)>,
    sedan: (PathBuf, VehicleSpec),
    vehicles: Vec<(String, Vehicle)>,
    scenarios: Vec<(String, Simulation)>,
}

impl Corpus {
    /// Reads the shipped assets under `root` (the workspace root) and builds the vehicles and
    /// scenarios (each vehicle stepped part-way through a launch, so cases start mid-motion).
    pub fn load(root: &Path) -> Result<Self, String> {
        let read = |dir: &str| -> Result<Vec<(PathBuf, String)>, String> {
            let mut out = Vec::new();
            let mut paths: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
                .map_err(|e| format!("{dir}: {e}"))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "ron"))
                .collect();
            paths.sort();
            for p in paths {
                let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                out.push((p, text));
            }
            Ok(out)
        };
        let mut files = read("assets/scenarios/msl")?;
        files.extend(read("assets/scenarios/elements")?);
        files.extend(read("assets/vehicles")?);
        let gearboxes = read("assets/gearboxes")?;
        let sedan_path = root.join("assets/vehicles/sedan_8hp.ron");
        let sedan = Vehicle::load(&sedan_path).map_err(|e| e.to_string())?.spec().clone();
        let mut vehicles = Vec::new();
        for (p, _) in files.iter().filter(|(p, _)| p.parent().is_some_and(|d| d.ends_with("vehicles"))) {
            let mut v = Vehicle::load(p).map_err(|e| e.to_string())?;
            let mut input = DriverInput { selector: Selector::Drive, gear: 1, ..Default::default() };
            for k in 0..300 {
                input.clutch = if k < 100 { 1.0 } else { 0.3 };
                input.throttle = if k < 100 { 0.0 } else { 0.6 };
                v.step(&input, 1.0 / 60.0).map_err(|e| format!("{}: {e}", p.display()))?;
            }
            vehicles.push((p.file_name().unwrap_or_default().to_string_lossy().into_owned(), v));
        }
        let mut scenarios = Vec::new();
        for (p, _) in files.iter().filter(|(p, _)| p.parent().is_some_and(|d| !d.ends_with("vehicles"))) {
            let (_, net) = Scenario::load_network(p).map_err(|e| e.to_string())?;
            scenarios.push((p.file_name().unwrap_or_default().to_string_lossy().into_owned(), Simulation::new(net)));
        }
        Ok(Corpus { files, gearboxes, sedan: (sedan_path, sedan), vehicles, scenarios })
    }
}

/// What a case did (its counters) or why it failed.
#[derive(Default)]
struct Outcome {
    rejected: bool,
    accepted: bool,
    steps: u64,
    blowup: bool,
}

type CaseResult = Result<Outcome, Defect>;

/// Runs case `index` of run `seed`; returns what it did, or its defect and a description.
pub fn run_case(corpus: &Corpus, seed: u64, index: u64) -> (String, Result<CaseCounts, Defect>) {
    let mut rng = Rng::for_case(seed, index);
    let started = Instant::now();
    let kind = rng.below(10);
    let mut what = String::new();
    let result = catch_unwind(AssertUnwindSafe(|| match kind {
        0..=2 => mutated_file(corpus, &mut rng, &mut what),
        3 => random_network(&mut rng, &mut what),
        4..=7 => vehicle_inputs(corpus, &mut rng, &mut what),
        _ => scenario_inputs(corpus, &mut rng, &mut what),
    }));
    let result = match result {
        Ok(r) => r,
        Err(p) => Err(Defect::Panic(panic_message(&p))),
    };
    let elapsed = started.elapsed();
    let result = match result {
        Ok(_) if elapsed > SLOW => Err(Defect::Slow(elapsed.as_secs_f64())),
        r => r,
    };
    (what, result.map(|o| CaseCounts { rejected: o.rejected, accepted: o.accepted, steps: o.steps, blowup: o.blowup }))
}

/// What a case that did not fail did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseCounts {
    /// Its file was rejected by `check`.
    pub rejected: bool,
    /// Its file was accepted by `check` (then run).
    pub accepted: bool,
    /// Steps taken.
    pub steps: u64,
    /// Its run ended in a blow-up of the motion itself ([`Report::blowups`]).
    pub blowup: bool,
}

/// True when `sim` (at the start of a step of `dt` that failed with a typed error) runs away
/// by itself: taken again in pieces of `dt /` [`BLOWUP_PIECES`] (a piece that fails, or leaves
/// the energy ledger open, is halved and taken again, down to 2^-60 of it), its fastest speed
/// grows past [`BLOWUP_GROWTH`] times its start (plus one) while the energy ledger stays closed
/// to 1e-6 of its scale (and a nanojoule, for a ledger that has hardly moved): the sources do
/// the work that drives the motion to infinity, which a solver's own runaway would not.
fn blows_up(sim: &mut Simulation, dt: f64) -> bool {
    let size = |s: &Simulation| s.speeds().iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let start = size(sim);
    let t_end = sim.time() + dt;
    let mut h = dt / BLOWUP_PIECES as f64;
    let mut halvings = 0;
    // The state before the piece: a piece that leaves the ledger open (it stepped across the
    // singularity) is taken again from there, halved.
    let mut before = sim.clone();
    // (At most a hundred times the pieces: a motion that neither grows nor fails in them is
    // not a blow-up.)
    for _ in 0..100 * BLOWUP_PIECES {
        if sim.time() >= t_end || halvings >= 60 {
            break;
        }
        if sim.step(h.min(t_end - sim.time())).is_err() {
            h *= 0.5;
            halvings += 1;
            continue;
        }
        let Some(e) = sim.energy() else { return false };
        // (A NaN residual is not closed.)
        let closed = e.residual().abs() <= 1e-6 * e.scale() + 1e-9;
        if !closed {
            sim.clone_from(&before);
            h *= 0.5;
            halvings += 1;
            continue;
        }
        if size(sim) > BLOWUP_GROWTH * (1.0 + start) {
            return true;
        }
        before.clone_from(sim);
    }
    false
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into())
}

/// Text with one number replaced, a line dropped or doubled, two numbers swapped, or cut short.
pub fn mutate(text: &str, rng: &mut Rng) -> String {
    let mut out = text.to_string();
    for _ in 0..1 + rng.below(3) {
        let spans = number_spans(&out);
        match rng.below(10) {
            0..=5 if !spans.is_empty() => {
                let (a, b) = *rng.pick(&spans);
                let old: f64 = out[a..b].parse().unwrap_or(1.0);
                let new = rng.nasty(if old == 0.0 { 1.0 } else { old });
                // RON has no NaN or infinity literals: those become what a typo would give.
                let text = if new.is_finite() { format!("{new:?}") } else { "1e999".to_string() };
                out.replace_range(a..b, &text);
            }
            6 => {
                let lines: Vec<&str> = out.lines().collect();
                let k = rng.below(lines.len().max(1));
                out = lines.iter().enumerate().filter(|(i, _)| *i != k).map(|(_, l)| *l).collect::<Vec<_>>().join("\n");
            }
            7 => {
                let lines: Vec<&str> = out.lines().collect();
                let k = rng.below(lines.len().max(1));
                let mut v: Vec<&str> = lines.clone();
                if let Some(l) = lines.get(k) {
                    v.insert(k, l);
                }
                out = v.join("\n");
            }
            8 if spans.len() >= 2 => {
                let (a, b) = *rng.pick(&spans);
                let (c, d) = *rng.pick(&spans);
                if b <= c {
                    let (x, y) = (out[a..b].to_string(), out[c..d].to_string());
                    out.replace_range(c..d, &x);
                    out.replace_range(a..b, &y);
                }
            }
            _ => {
                let cut = rng.below(out.len().max(1));
                if out.is_char_boundary(cut) {
                    out.truncate(cut);
                }
            }
        }
    }
    out
}

/// Byte ranges of the numeric literals in `text` (outside comments and strings).
fn number_spans(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += 1;
                }
                i += 1;
            }
            c if c.is_ascii_digit() || (c == b'-' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit())) => {
                let prev_ident = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
                let start = i;
                i += 1;
                while i < b.len()
                    && (b[i].is_ascii_digit()
                        || b[i] == b'.'
                        || b[i] == b'e'
                        || b[i] == b'E'
                        || ((b[i] == b'-' || b[i] == b'+') && (b[i - 1] == b'e' || b[i - 1] == b'E')))
                {
                    i += 1;
                }
                if !prev_ident {
                    out.push((start, i));
                }
            }
            _ => i += 1,
        }
    }
    out
}

fn mutated_file(corpus: &Corpus, rng: &mut Rng, what: &mut String) -> CaseResult {
    let gearbox = rng.chance(0.2);
    let (path, text) = if gearbox { rng.pick(&corpus.gearboxes) } else { rng.pick(&corpus.files) };
    *what = format!("mutated {}", path.display());
    let original = text;
    let text = mutate(text, rng);
    // The lines the mutation changed, to replay and read.
    let changed: Vec<&str> = text.lines().filter(|l| !original.lines().any(|o| o == *l)).take(3).collect();
    what.push_str(&format!(" {changed:?}"));
    if std::env::var_os("FUZZ_TRACE").is_some() {
        eprintln!("{what}");
    }
    let file = path.display().to_string();
    let is_vehicle = path.parent().is_some_and(|d| d.ends_with("vehicles"));
    let mut outcome = Outcome::default();
    if gearbox {
        let Ok((g, _)) = GearboxSpec::parse_analysed(&text, &file) else {
            outcome.rejected = true;
            return Ok(outcome);
        };
        let mut spec = corpus.sedan.1.clone();
        if let Some(at) = spec.automatic.as_mut() {
            at.gearbox = GearboxSource::Inline(Box::new(g));
        }
        let Ok(v) = Vehicle::new(spec) else {
            outcome.rejected = true;
            return Ok(outcome);
        };
        outcome.accepted = true;
        return drive(v, rng, 12, outcome, true);
    }
    if is_vehicle {
        let v = Vehicle::parse(&text, &file).and_then(|spec| Vehicle::from_text(spec, &text, &file));
        let Ok(v) = v else {
            outcome.rejected = true;
            return Ok(outcome);
        };
        outcome.accepted = true;
        return drive(v, rng, 12, outcome, true);
    }
    let net = Scenario::parse(&text, &file).and_then(|sc| sc.build(&text, &file));
    let Ok(net) = net else {
        outcome.rejected = true;
        return Ok(outcome);
    };
    outcome.accepted = true;
    run_network(Simulation::new(net), rng, 12, outcome, true)
}

/// Drives a vehicle `steps` steps of random inputs and step sizes, with snapshot round trips.
/// `accepted`: it came from a file `check` accepted, so a failed step is a defect.
fn drive(mut v: Vehicle, rng: &mut Rng, steps: usize, mut outcome: Outcome, accepted: bool) -> CaseResult {
    let mut input = DriverInput { selector: Selector::Drive, ..Default::default() };
    let mut saved: Option<(Vehicle, driveline_core::VehicleSnapshot)> = None;
    for _ in 0..steps {
        let pedal = |rng: &mut Rng, x: f64| if rng.chance(0.1) { rng.nasty(1.0) } else { x };
        let x = rng.unit();
        input.throttle = pedal(rng, x);
        let x = if rng.chance(0.3) { rng.unit() } else { 0.0 };
        input.brake = pedal(rng, x);
        let x = if rng.chance(0.3) { rng.unit() } else { 0.0 };
        input.clutch = pedal(rng, x);
        input.parking_brake = pedal(rng, 0.0);
        input.grade = if rng.chance(0.1) { rng.nasty(0.1) } else { 0.0 };
        if rng.chance(0.2) {
            input.gear = rng.below(9) as i32 - 2;
        }
        input.shift_up = rng.chance(0.1);
        input.shift_down = rng.chance(0.1);
        if rng.chance(0.05) {
            input.selector =
                *rng.pick(&[Selector::Park, Selector::Reverse, Selector::Neutral, Selector::Drive, Selector::Manual]);
        }
        input.ignition = !rng.chance(0.02);
        input.starter = rng.chance(0.02);
        if rng.chance(0.05) {
            let (w, n) = (rng.below(4), rng.nasty(1.0));
            v.set_surface_friction(w, n);
        }
        let dt = rng.step_size();
        if rng.chance(0.05) {
            saved = Some((v.clone(), v.snapshot()));
        }
        if let Some(dir) = std::env::var_os("FUZZ_TRACE") {
            // The state before each step, to replay the failing one in a test.
            eprintln!(
                "t = {}, v = {:e}, rpm {:e}: step {dt:e} with {input:?}",
                v.telemetry().time,
                v.telemetry().speed,
                v.telemetry().engine_rpm
            );
            let snap = serde_json::to_string(&v.snapshot()).unwrap_or_default();
            let _ = std::fs::write(Path::new(&dir).join(format!("snapshot_{}.json", outcome.steps)), snap);
        }
        let distance = v.telemetry().distance;
        match v.step(&input, dt) {
            Ok(()) => {
                outcome.steps += 1;
                let t = v.telemetry();
                // (A motion that ran away within the step and came back to rest shows in the
                // distance it covered.)
                let covered = (t.distance - distance).abs();
                let past = covered > 1e3 * dt + 1e-9;
                if past {
                    return Err(Defect::Diverged(format!(
                        "step of {dt:e} s to t = {}: covered {covered:e} m, faster than 1,000 m/s",
                        t.time
                    )));
                }
                if !(t.speed.is_finite() && t.engine_rpm.is_finite() && t.time.is_finite()) {
                    check_telemetry(&v)?;
                }
                if t.speed.abs() > 1e3 || t.engine_rpm.abs() > 1e6 || t.wheel_speed.iter().any(|w| w.abs() > 1e5) {
                    return Err(Defect::Diverged(format!(
                        "step of {dt:e} s to t = {}: speed {:e} m/s, engine {:e} rpm, wheels {:?} rad/s",
                        t.time, t.speed, t.engine_rpm, t.wheel_speed
                    )));
                }
            }
            // (A step that cannot advance the clock, or too long, is refused: as documented.)
            Err(StepError::BadStep(_) | StepError::TooShort { .. } | StepError::TooLong { .. }) => {}
            Err(e) if accepted => return Err(Defect::AcceptedButFails(format!("step of {dt:e} s: {e}"))),
            Err(_) => return Ok(outcome),
        }
        if let Some((original, snap)) = saved.as_mut().filter(|_| rng.chance(0.2)) {
            // The original copy, restored from the snapshot and stepped, must agree with the
            // copy stepped without it.
            let mut restored = original.clone();
            restored.restore(snap).map_err(|e| Defect::Snapshot(e.to_string()))?;
            let (a, b) = (original.step(&input, 1.0 / 60.0), restored.step(&input, 1.0 / 60.0));
            if a.is_ok() != b.is_ok() || (a.is_ok() && original.snapshot() != restored.snapshot()) {
                return Err(Defect::Snapshot("a restored copy left the original's path".into()));
            }
            saved = None;
        }
    }
    check_telemetry(&v)?;
    Ok(outcome)
}

fn check_telemetry(v: &Vehicle) -> Result<(), Defect> {
    let t = v.telemetry();
    let value = serde_json::to_value(t).map_err(|e| Defect::NonFinite(e.to_string()))?;
    fn walk(v: &serde_json::Value, path: &str) -> Option<String> {
        match v {
            serde_json::Value::Null => Some(path.to_string()),
            serde_json::Value::Array(a) => a.iter().enumerate().find_map(|(i, x)| walk(x, &format!("{path}[{i}]"))),
            serde_json::Value::Object(o) => o.iter().find_map(|(k, x)| walk(x, &format!("{path}.{k}"))),
            _ => None,
        }
    }
    if let Some(p) = walk(&value, "telemetry") {
        return Err(Defect::NonFinite(format!("{p} at t = {}", t.time)));
    }
    let sim = v.simulation();
    if let Some(k) = sim.speeds().iter().chain(sim.angles()).position(|x| !x.is_finite()) {
        return Err(Defect::NonFinite(format!("state entry {k} at t = {}", sim.time())));
    }
    Ok(())
}

/// Steps a network `steps` steps of random sizes, setting its inputs to random values.
fn run_network(mut sim: Simulation, rng: &mut Rng, steps: usize, mut outcome: Outcome, accepted: bool) -> CaseResult {
    let names = sim.input_names();
    for _ in 0..steps {
        if !names.is_empty() && rng.chance(0.3) {
            let name = rng.pick(&names).clone();
            let value = if rng.chance(0.5) { rng.nasty(1.0) } else { rng.unit() * 2.0 - 0.5 };
            // The input policy: NaN is refused (the input keeps its last value), a value past
            // the signal range is clamped and taken.
            if sim.set_input(&name, value).is_ok() == value.is_nan() {
                return Err(Defect::NonFinite(format!("set_input({name}, {value}) broke the input policy")));
            }
        }
        let dt = rng.step_size();
        if std::env::var_os("FUZZ_TRACE").is_some() {
            eprintln!("t = {}: step {dt:e}, energy {:?}, speeds {:?}", sim.time(), sim.energy(), sim.speeds());
        }
        match sim.step(dt) {
            Ok(()) => {
                outcome.steps += 1;
                if let Some(k) = sim.speeds().iter().chain(sim.angles()).position(|x| !x.is_finite()) {
                    return Err(Defect::NonFinite(format!("state entry {k} at t = {}", sim.time())));
                }
                if let Some(e) = sim.energy()
                    && !(e.input.is_finite() && e.dissipated.is_finite() && e.kinetic.is_finite())
                {
                    return Err(Defect::NonFinite(format!("energy ledger {e:?}")));
                }
                if let Some(k) = (0..sim.network().elements.len())
                    .find(|&k| sim.element_temperature(k).is_some_and(|t| !t.is_finite()))
                {
                    return Err(Defect::NonFinite(format!("temperature of element {k} at t = {}", sim.time())));
                }
            }
            Err(StepError::BadStep(_) | StepError::TooShort { .. } | StepError::TooLong { .. }) => {}
            Err(StepError::NonFinite { .. } | StepError::Singular { .. } | StepError::NotConverged { .. })
                if accepted && blows_up(&mut sim, dt) =>
            {
                outcome.blowup = true;
                return Ok(outcome);
            }
            Err(e) if accepted => return Err(Defect::AcceptedButFails(format!("step of {dt:e} s: {e}"))),
            Err(_) => return Ok(outcome),
        }
    }
    Ok(outcome)
}

fn vehicle_inputs(corpus: &Corpus, rng: &mut Rng, what: &mut String) -> CaseResult {
    let (name, v) = rng.pick(&corpus.vehicles);
    *what = format!("inputs to {name}");
    let steps = 1 + rng.below(12);
    drive(v.clone(), rng, steps, Outcome::default(), false)
}

fn scenario_inputs(corpus: &Corpus, rng: &mut Rng, what: &mut String) -> CaseResult {
    let (name, sim) = rng.pick(&corpus.scenarios);
    *what = format!("inputs to {name}");
    if std::env::var_os("FUZZ_TRACE").is_some() {
        eprintln!("{what}");
    }
    let steps = 1 + rng.below(24);
    run_network(sim.clone(), rng, steps, Outcome::default(), false)
}

/// A parameter drawn over its range, now and then past it.
fn param(rng: &mut Rng, typical: f64) -> String {
    let v = if rng.chance(0.15) { rng.nasty(typical) } else { typical * 10f64.powf(rng.unit() * 2.0 - 1.0) };
    if v.is_finite() { format!("{v:?}") } else { "1e999".into() }
}

/// A random scenario: a chain of inertias joined by couplings, with sources and brakes.
pub fn random_scenario(rng: &mut Rng) -> String {
    let n = 2 + rng.below(5);
    let mut elements = vec!["(name: \"fixed\", kind: Fixed())".to_string()];
    let mut connections = Vec::new();
    for k in 0..n {
        let j = param(rng, 0.1);
        let w0 = if rng.chance(0.5) { format!(", w_start: {}", param(rng, 50.0)) } else { String::new() };
        elements.push(format!("(name: \"J{k}\", kind: Inertia(J: {j}{w0}))"));
    }
    for k in 0..n - 1 {
        let name = format!("c{k}");
        let kind = match rng.below(10) {
            0 => format!("IdealGear(ratio: {})", param(rng, 3.0)),
            1 => format!("Spring(c: {})", param(rng, 1e4)),
            2 => format!("Damper(d: {})", param(rng, 10.0)),
            3 => format!("SpringDamper(c: {}, d: {})", param(rng, 1e4), param(rng, 10.0)),
            4 => format!(
                "{}(c: {}, d: {}, b: {})",
                if rng.chance(0.5) { "ElastoBacklash" } else { "ElastoBacklash2" },
                param(rng, 1e5),
                param(rng, 10.0),
                param(rng, 0.01)
            ),
            5 => format!(
                "Clutch(fn_max: {}, mu_pos: [(0.0, 0.5)], f_normalized: Constant({}))",
                param(rng, 1e3),
                param(rng, 1.0)
            ),
            6 => format!(
                "Clutch(fn_max: {}, mu_pos: [(0.0, 0.5), (100.0, 0.3)], peak: {}, f_normalized: Step(height: 1.0, start_time: {}))",
                param(rng, 1e3),
                param(rng, 1.1),
                param(rng, 0.01)
            ),
            7 => {
                format!("OneWayClutch(fn_max: {}, mu_pos: [(0.0, 0.5)], f_normalized: Constant(1.0))", param(rng, 1e3))
            }
            8 => match rng.below(4) {
                0 => format!("Disc(deltaPhi: {})", param(rng, 1.0)),
                1 => "MultiSensor()".to_string(),
                2 => format!("Torque2(tau: Constant({}))", param(rng, 10.0)),
                _ => "RelSpeedSensor()".to_string(),
            },
            _ => format!("IdealGear(ratio: {})", param(rng, 0.5)),
        };
        elements.push(format!("(name: \"{name}\", kind: {kind})"));
        connections.push(format!("(\"J{k}.flange_b\", \"{name}.flange_a\")"));
        connections.push(format!("(\"{name}.flange_b\", \"J{}.flange_a\")", k + 1));
    }
    // Sources and brakes on random inertias.
    for s in 0..1 + rng.below(3) {
        let at = rng.below(n);
        let (name, kind) = match rng.below(9) {
            0 => (format!("tau{s}"), format!("Torque(tau: Constant({}))", param(rng, 10.0))),
            1 => (
                format!("tau{s}"),
                format!("Torque(tau: Sine(amplitude: {}, f: {}))", param(rng, 10.0), param(rng, 5.0)),
            ),
            2 => (
                format!("brake{s}"),
                format!("Brake(fn_max: {}, mu_pos: [(0.0, 0.5)], f_normalized: Constant(1.0))", param(rng, 1e2)),
            ),
            3 => (
                format!("bearing{s}"),
                format!("BearingFriction(tau_pos: [(0.0, {})], peak: {})", param(rng, 1.0), param(rng, 1.2)),
            ),
            4 => (
                format!("drag{s}"),
                format!(
                    "QuadraticSpeedDependentTorque(tau_nominal: {}, w_nominal: {})",
                    param(rng, -5.0),
                    param(rng, 100.0)
                ),
            ),
            5 => (
                format!("drag{s}"),
                format!(
                    "LinearSpeedDependentTorque(tau_nominal: {}, w_nominal: {}, torque_direction: {})",
                    param(rng, -5.0),
                    param(rng, 100.0),
                    rng.chance(0.5)
                ),
            ),
            6 => (
                format!("motor{s}"),
                format!(
                    "InverseSpeedDependentTorque(tau_nominal: {}, w_nominal: {}, w0: {}, torque_direction: {})",
                    param(rng, 5.0),
                    param(rng, 100.0),
                    param(rng, 1.0),
                    rng.chance(0.5)
                ),
            ),
            7 => (
                format!("drag{s}"),
                format!(
                    "SignTorque(tau_nominal: {}, w0: {}, reg: {})",
                    param(rng, -2.0),
                    param(rng, 1.0),
                    ["Exp", "Sine", "Linear", "CoSine"][rng.below(4)]
                ),
            ),
            8 if rng.chance(0.5) => (
                format!("eddy{s}"),
                format!(
                    "EddyCurrentTorque(tau_nominal: Constant({}), w_nominal: {}, alpha20: {})",
                    param(rng, 10.0),
                    param(rng, 10.0),
                    param(rng, 4e-3)
                ),
            ),
            _ => (format!("speed{s}"), "SpeedSensor()".to_string()),
        };
        let flange =
            if kind.starts_with("Brake") || kind.starts_with("BearingFriction") { "flange_a" } else { "flange" };
        elements.push(format!("(name: \"{name}\", kind: {kind})"));
        connections.push(format!("(\"{name}.{flange}\", \"J{at}.flange_a\")"));
    }
    // Now and then a thermal network: every dissipative element's heat port on one capacity,
    // cooled by a convection to a fixed temperature.
    if rng.chance(0.3) {
        const HEATED: [&str; 9] = [
            "Damper",
            "SpringDamper",
            "ElastoBacklash",
            "ElastoBacklash2",
            "Clutch",
            "OneWayClutch",
            "Brake",
            "BearingFriction",
            "EddyCurrentTorque",
        ];
        let heated: Vec<String> = elements
            .iter()
            .filter(|e| HEATED.iter().any(|k| e.contains(&format!("kind: {k}("))))
            .map(|e| e.split('"').nth(1).unwrap_or_default().to_string())
            .collect();
        elements.push(format!(
            "(name: \"cap\", kind: HeatCapacitor(C: {}, T_start: {}))",
            param(rng, 10.0),
            param(rng, 300.0)
        ));
        elements.push(format!("(name: \"conv\", kind: Convection(Gc: Constant({})))", param(rng, 5.0)));
        elements.push(format!("(name: \"amb\", kind: FixedTemperature(T: {}))", param(rng, 300.0)));
        connections.push("(\"conv.solid\", \"cap.port\")".to_string());
        connections.push("(\"conv.fluid\", \"amb.port\")".to_string());
        for name in heated {
            connections.push(format!("(\"{name}.heatPort\", \"cap.port\")"));
        }
    }
    format!(
        "Scenario(\n    name: \"random\",\n    t_end: 1.0,\n    dt: 0.001,\n    elements: [\n        {}\n    ],\n    connections: [\n        {}\n    ],\n)\n",
        elements.join(",\n        "),
        connections.join(",\n        ")
    )
}

fn random_network(rng: &mut Rng, what: &mut String) -> CaseResult {
    let text = random_scenario(rng);
    *what = format!("random network:\n{text}");
    if std::env::var_os("FUZZ_TRACE").is_some() {
        eprintln!("{what}");
    }
    let mut outcome = Outcome::default();
    let net = Scenario::parse(&text, "random.ron").and_then(|sc| sc.build(&text, "random.ron"));
    let Ok(net) = net else {
        outcome.rejected = true;
        return Ok(outcome);
    };
    outcome.accepted = true;
    run_network(Simulation::new(net), rng, 12, outcome, true)
}

/// Runs cases `0..executions` of `seed` on `threads` threads (case `k` on thread `k % threads`),
/// stopping early after `limit`; `progress` is called now and then with the totals so far.
pub fn run(
    corpus: &Corpus,
    seed: u64,
    executions: u64,
    threads: usize,
    limit: Option<Duration>,
    progress: &(dyn Fn(&Report) + Sync),
) -> Report {
    let started = Instant::now();
    let report = Mutex::new(Report::default());
    // Panics are caught and reported as findings; the default hook would print each one.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    // Each thread's case and when it started (ms since the run started), for the watchdog.
    let running: Vec<(std::sync::atomic::AtomicU64, std::sync::atomic::AtomicU64)> =
        (0..threads.max(1)).map(|_| (u64::MAX.into(), 0.into())).collect();
    let done = std::sync::atomic::AtomicUsize::new(0);
    use std::sync::atomic::Ordering::Relaxed;
    std::thread::scope(|s| {
        for t in 0..threads.max(1) {
            let report = &report;
            let (running, done) = (&running, &done);
            s.spawn(move || {
                let mut local = Report::default();
                let mut k = t as u64;
                let mut last = Instant::now();
                while k < executions {
                    if limit.is_some_and(|l| started.elapsed() > l) {
                        break;
                    }
                    running[t].1.store(started.elapsed().as_millis() as u64, Relaxed);
                    running[t].0.store(k, Relaxed);
                    let (what, r) = run_case(corpus, seed, k);
                    running[t].0.store(u64::MAX, Relaxed);
                    local.executions += 1;
                    match r {
                        Ok(c) => {
                            local.rejected += c.rejected as u64;
                            local.accepted += c.accepted as u64;
                            local.steps += c.steps;
                            local.blowups += c.blowup as u64;
                        }
                        Err(defect) => {
                            local.failed += 1;
                            match defect {
                                Defect::AcceptedButFails(_) => local.errors_after_check += 1,
                                Defect::Panic(_) => local.panics += 1,
                                Defect::NonFinite(_) => local.non_finite += 1,
                                Defect::Diverged(_) => local.diverged += 1,
                                Defect::Snapshot(_) => local.snapshot += 1,
                                Defect::Slow(_) => local.slow += 1,
                            }
                            local.findings.push(Finding { case: k, what, defect });
                        }
                    }
                    k += threads.max(1) as u64;
                    if last.elapsed() > Duration::from_secs(10) || k >= executions {
                        let mut r = report.lock().expect("report");
                        merge(&mut r, &mut local);
                        r.seconds = started.elapsed().as_secs_f64();
                        if t == 0 {
                            progress(&r);
                        }
                        last = Instant::now();
                    }
                }
                merge(&mut report.lock().expect("report"), &mut local);
                done.fetch_add(1, Relaxed);
            });
        }
        // The watchdog: a case that runs past HANG cannot be stopped from outside its thread;
        // it is reported and the run ends.
        while done.load(Relaxed) < threads.max(1) {
            std::thread::sleep(Duration::from_millis(200));
            for r in running.iter() {
                let case = r.0.load(Relaxed);
                let since = Duration::from_millis(r.1.load(Relaxed));
                if case != u64::MAX && started.elapsed().saturating_sub(since) > HANG {
                    eprintln!("hang: case {case} of seed {seed} has run for over {} s", HANG.as_secs());
                    std::process::exit(3);
                }
            }
        }
    });
    std::panic::set_hook(hook);
    let mut r = report.into_inner().expect("report");
    r.findings.sort_by_key(|f| f.case);
    r.findings.truncate(100);
    r.seconds = started.elapsed().as_secs_f64();
    r
}

fn merge(into: &mut Report, from: &mut Report) {
    into.executions += from.executions;
    into.rejected += from.rejected;
    into.accepted += from.accepted;
    into.steps += from.steps;
    into.failed += from.failed;
    into.errors_after_check += from.errors_after_check;
    into.blowups += from.blowups;
    into.panics += from.panics;
    into.non_finite += from.non_finite;
    into.diverged += from.diverged;
    into.snapshot += from.snapshot;
    into.slow += from.slow;
    if into.findings.len() < 100 {
        into.findings.append(&mut from.findings);
    }
    *from = Report::default();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit inertia at 10 rad/s driven by `tau = k w^2` with `k = 1` (a positive nominal
    /// torque drives): `w = 1 / (1/10 - t)` reaches infinity at 0.1 s. A step past it
    /// fails, and taken in finer pieces it grows a millionfold with the ledger closed: a blow-up
    /// of the motion. The same network with the torque as a drag steps cleanly, and is no
    /// blow-up.
    #[test]
    fn a_quadratic_drive_that_reaches_infinity_is_a_blow_up_of_the_motion() {
        let net = |tau: f64| {
            let text = format!(
                r#"Scenario(name: "blowup", t_end: 1.0, elements: [
                    (name: "J", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 10.0)),
                    (name: "drive", kind: QuadraticSpeedDependentTorque(tau_nominal: {tau:e}, w_nominal: 1.0)),
                ], connections: [("drive.flange", "J.flange_a")])"#
            );
            let sc = Scenario::parse(&text, "blowup").expect("parses");
            Simulation::new(sc.build(&text, "blowup").expect("builds"))
        };
        let mut sim = net(1.0);
        for _ in 0..5 {
            sim.step(0.01).expect("before the blow-up");
        }
        // (Halfway to the blow-up, the Gauss step's error is well under 1e-6.)
        let w = sim.speeds()[0];
        assert!((w - 1.0 / (0.1 - 0.05)).abs() < 1e-6 * w, "{w}");
        let err = sim.step(0.1).expect_err("the motion reaches infinity inside the step");
        assert!(
            matches!(err, StepError::NonFinite { .. } | StepError::Singular { .. } | StepError::NotConverged { .. }),
            "{err}"
        );
        assert!(blows_up(&mut sim, 0.1));
        assert!(!blows_up(&mut net(-1.0), 0.1));
    }
}
