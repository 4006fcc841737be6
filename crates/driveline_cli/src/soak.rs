//! `driveline soak`: a long run of many vehicles of every shipped kind over mixed drive cycles,
//! with the energy ledger on, checking that nothing goes wrong over time: no step error, no
//! non-finite telemetry, the energy ledger balanced, resident memory flat.
//!
//! Each vehicle follows the shipped cycles played one after another (about 3.3 hours of
//! traces), entered at its own offset so that the fleet is spread over every cycle. Vehicles
//! run on `--threads` threads a simulated minute at a time; between minutes the process's
//! resident memory (`VmRSS`) is sampled.
//!
//! The run passes when:
//! - no step returns an error and no telemetry value is NaN or infinite;
//! - every vehicle's energy ledger balances within [`LEDGER_TOLERANCE`] of its scale
//!   ([`driveline_core::EnergyLedger::residual`] against [`driveline_core::EnergyLedger::scale`]);
//! - the resident memory after the first simulated minute never exceeds its value at the end of
//!   that minute by more than [`RSS_GROWTH`] (relative) plus [`RSS_SLACK`] bytes.

use driveline_core::Vehicle;
use driveline_core::vehicle::driver::{Cycle, Driver, DriverParams};
use std::path::PathBuf;
use std::time::Instant;

/// The largest relative energy-ledger residual a soak accepts: 1e-9.
pub const LEDGER_TOLERANCE: f64 = 1e-9;
/// The resident memory may grow this much (relative) after the first minute: 1 %.
pub const RSS_GROWTH: f64 = 0.01;
/// ... plus this many bytes (allocator noise): 1 MiB.
pub const RSS_SLACK: u64 = 1 << 20;

/// Options of `driveline soak`.
pub struct SoakOptions {
    /// Directory of vehicle files: every `.ron` in it is one kind.
    pub vehicles: PathBuf,
    /// Vehicles of each kind.
    pub per_kind: usize,
    /// Simulated time, s.
    pub seconds: f64,
    /// Fixed step, s.
    pub dt: f64,
    /// Worker threads (0: one per core).
    pub threads: usize,
    /// Where to write the figures as JSON.
    pub json: Option<PathBuf>,
}

/// The figures of one kind of vehicle.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KindFigures {
    /// The vehicle's name.
    pub vehicle: String,
    /// Vehicles of this kind.
    pub vehicles: usize,
    /// Step errors (each stops its vehicle).
    pub step_errors: u64,
    /// Steps whose telemetry held a NaN or infinite value.
    pub non_finite: u64,
    /// The largest relative energy-ledger residual over the kind's vehicles.
    pub max_ledger_residual: f64,
    /// Distance driven by all vehicles of the kind, km.
    pub distance_km: f64,
    /// Energy dissipated by all vehicles of the kind, MJ.
    pub dissipated_mj: f64,
    /// The first error, if any: vehicle index, time and message.
    pub first_error: Option<String>,
}

/// What a soak measured (the `--json` contract).
#[derive(Debug, Clone, serde::Serialize)]
pub struct SoakResult {
    /// Simulated time, s.
    pub seconds: f64,
    /// The step, s.
    pub dt: f64,
    /// Vehicles in all.
    pub vehicles: usize,
    /// Vehicle-steps in all.
    pub vehicle_steps: u64,
    /// Wall time, s.
    pub wall_s: f64,
    /// Vehicle-steps per wall second.
    pub vehicle_steps_per_s: f64,
    /// Worker threads.
    pub threads: usize,
    /// Resident memory at the end of each simulated minute, bytes (minute 1 first).
    pub rss_bytes: Vec<u64>,
    /// Resident memory after loading, before the first step, bytes.
    pub rss_start_bytes: u64,
    /// Per kind of vehicle.
    pub kinds: Vec<KindFigures>,
    /// Every criterion held.
    pub passed: bool,
    /// What failed, if anything.
    pub failures: Vec<String>,
}

/// The shipped cycles one after another (each shifted to start a second after the last ended).
pub fn mixed_cycle() -> Result<Cycle, String> {
    let mut out = Cycle { name: "mixed".into(), time: Vec::new(), speed: Vec::new() };
    for (name, _) in crate::run::BUILTIN {
        let c = crate::run::load_cycle(name)?;
        let start = out.time.last().map_or(0.0, |t| t + 1.0);
        out.time.extend(c.time.iter().map(|t| t - c.time[0] + start));
        out.speed.extend(&c.speed);
    }
    Ok(out)
}

/// One vehicle of the soak.
struct Car {
    kind: usize,
    vehicle: Vehicle,
    driver: Driver,
    /// Where on the mixed cycle it started, s.
    offset: f64,
    /// Stopped by a step error.
    failed: bool,
    non_finite: u64,
    error: Option<String>,
}

impl Car {
    /// Steps until the vehicle's clock reaches `until`, s.
    fn run_until(&mut self, cycle: &Cycle, until: f64, dt: f64) -> u64 {
        let mut steps = 0;
        while !self.failed && self.vehicle.telemetry().time + 0.5 * dt < until {
            let t = self.vehicle.telemetry();
            let input = self.driver.input_at(cycle, cycle.lap(t.time + self.offset), t, dt);
            if let Err(e) = self.vehicle.step(&input, dt) {
                self.failed = true;
                self.error = Some(format!("t = {:.3} s: {e}", self.vehicle.telemetry().time));
                break;
            }
            steps += 1;
            let t = self.vehicle.telemetry();
            let finite = [t.speed, t.engine_rpm, t.engine_torque, t.distance, t.fuel_used, t.clutch_temperature]
                .iter()
                .chain(&t.wheel_speed)
                .chain(&t.tyre_force)
                .all(|v| v.is_finite());
            if !finite {
                self.non_finite += 1;
            }
        }
        steps
    }
}

/// Runs the soak; prints a line a simulated minute and returns the figures.
pub fn soak(o: SoakOptions) -> Result<SoakResult, String> {
    if !(o.dt.is_finite() && o.dt > 0.0 && o.dt <= 0.05) {
        return Err(format!("--dt {}: the step must be in (0, 0.05] s", o.dt));
    }
    if !(o.seconds.is_finite() && o.seconds > 0.0 && o.seconds <= 1e6) {
        return Err(format!("--seconds {}: give a duration in (0, 1e6] s", o.seconds));
    }
    let threads = if o.threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { o.threads };
    let cycle = mixed_cycle()?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&o.vehicles)
        .map_err(|e| format!("{}: {e}", o.vehicles.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ron"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("{}: no vehicle files (.ron)", o.vehicles.display()));
    }
    let mut names = Vec::new();
    let mut cars = Vec::new();
    for (kind, path) in files.iter().enumerate() {
        let proto = Vehicle::load(path).map_err(|e| e.to_string())?;
        names.push(proto.spec().name.clone());
        for i in 0..o.per_kind {
            let mut vehicle = proto.clone();
            vehicle.set_track_energy(true);
            let driver = Driver::new(vehicle.spec(), DriverParams::default());
            let offset = cycle.duration() * i as f64 / o.per_kind as f64;
            cars.push(Car { kind, vehicle, driver, offset, failed: false, non_finite: 0, error: None });
        }
    }
    // Interleave the kinds so that each thread gets a like share of each.
    cars.sort_by_key(|c| (c.offset.to_bits(), c.kind));
    let rss_start = driveline_core::process::rss_bytes();
    let started = Instant::now();
    let minutes = (o.seconds / 60.0).ceil() as usize;
    let mut rss = Vec::with_capacity(minutes);
    let mut vehicle_steps = 0u64;
    let chunk = cars.len().div_ceil(threads).max(1);
    for m in 1..=minutes {
        let until = (m as f64 * 60.0).min(o.seconds);
        let (cycle, dt) = (&cycle, o.dt);
        let steps: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = cars
                .chunks_mut(chunk)
                .map(|part| s.spawn(move || part.iter_mut().map(|c| c.run_until(cycle, until, dt)).sum::<u64>()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        });
        vehicle_steps += steps;
        rss.push(driveline_core::process::rss_bytes());
        let failed = cars.iter().filter(|c| c.failed).count();
        eprintln!(
            "soak: {:>6.0} s simulated, {:>7.1} s wall, {} vehicle-steps, RSS {:.1} MiB, {} stopped by errors",
            until,
            started.elapsed().as_secs_f64(),
            vehicle_steps,
            rss[rss.len() - 1] as f64 / (1 << 20) as f64,
            failed
        );
    }
    let wall = started.elapsed().as_secs_f64();
    let mut kinds: Vec<KindFigures> = names
        .iter()
        .map(|n| KindFigures {
            vehicle: n.clone(),
            vehicles: 0,
            step_errors: 0,
            non_finite: 0,
            max_ledger_residual: 0.0,
            distance_km: 0.0,
            dissipated_mj: 0.0,
            first_error: None,
        })
        .collect();
    let mut failures = Vec::new();
    for (i, c) in cars.iter().enumerate() {
        let k = &mut kinds[c.kind];
        k.vehicles += 1;
        k.step_errors += c.failed as u64;
        k.non_finite += c.non_finite;
        if let (Some(e), None) = (&c.error, &k.first_error) {
            k.first_error = Some(format!("vehicle {i}: {e}"));
        }
        let t = c.vehicle.telemetry();
        k.distance_km += t.distance / 1000.0;
        match c.vehicle.simulation().energy() {
            Some(e) => {
                let rel = e.residual().abs() / e.scale();
                // (A NaN residual counts as the worst.)
                k.max_ledger_residual = if rel.is_nan() { f64::NAN } else { k.max_ledger_residual.max(rel) };
                k.dissipated_mj += e.dissipated / 1e6;
            }
            None => failures.push(format!("{}: vehicle {i} has no energy ledger", k.vehicle)),
        }
    }
    for k in &kinds {
        if k.step_errors > 0 {
            failures.push(format!(
                "{}: {} step errors ({})",
                k.vehicle,
                k.step_errors,
                k.first_error.clone().unwrap_or_default()
            ));
        }
        if k.non_finite > 0 {
            failures.push(format!("{}: {} steps with non-finite telemetry", k.vehicle, k.non_finite));
        }
        if k.max_ledger_residual.is_nan() || k.max_ledger_residual > LEDGER_TOLERANCE {
            failures.push(format!(
                "{}: energy ledger residual {:e} of its scale (at most {LEDGER_TOLERANCE:e})",
                k.vehicle, k.max_ledger_residual
            ));
        }
    }
    if let Some(&first) = rss.first() {
        let limit = first + (first as f64 * RSS_GROWTH) as u64 + RSS_SLACK;
        if let Some((m, &r)) = rss.iter().enumerate().skip(1).find(|(_, r)| **r > limit) {
            failures.push(format!(
                "resident memory grew from {first} B after the first minute to {r} B after minute {} (limit {limit} B)",
                m + 1
            ));
        }
    }
    let result = SoakResult {
        seconds: o.seconds,
        dt: o.dt,
        vehicles: cars.len(),
        vehicle_steps,
        wall_s: wall,
        vehicle_steps_per_s: vehicle_steps as f64 / wall.max(1e-9),
        threads,
        rss_bytes: rss,
        rss_start_bytes: rss_start,
        kinds,
        passed: failures.is_empty(),
        failures,
    };
    if let Some(p) = &o.json {
        let text = serde_json::to_string_pretty(&result).map_err(|e| e.to_string())?;
        std::fs::write(p, text + "\n").map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(result)
}
