//! `driveline bench`: many independent vehicles in one headless Bevy App, each driven over a
//! drive cycle by the driver model, stepped in parallel across the compute task pool; or one
//! scenario network timed alone.

use bevy_app::{App, FixedUpdate, TaskPoolOptions, TaskPoolPlugin, TaskPoolThreadAssignmentPolicy};
use bevy_driveline::prelude::*;
use driveline_core::fleet::{Fleet, FleetDrive};
use driveline_core::vehicle::{Road, Vehicle};
use driveline_core::{Scenario, Simulation};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Seconds of the cycle between one car of the fleet and the next: the cars are spread over the
/// trace as traffic is.
const SPACING: f64 = 37.0;

/// Options of `driveline bench` (its command-line arguments).
#[derive(clap::Args)]
pub struct BenchOptions {
    /// Vehicle file (RON).
    #[arg(long, default_value = "assets/vehicles/sedan_8hp.ron")]
    pub vehicle: PathBuf,
    /// Number of independent vehicles.
    #[arg(long, default_value_t = 100)]
    pub vehicles: usize,
    /// Simulated seconds.
    #[arg(long, allow_negative_numbers = true, default_value_t = 10.0)]
    pub seconds: f64,
    /// Fixed step, s.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1e-3)]
    pub dt: f64,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Cycle the drivers follow (spread over the trace).
    #[arg(long, default_value = "udds")]
    pub cycle: String,
    /// Write {"vehicles", "steps", "vehicle_steps_per_s", "us_per_vehicle_step",
    /// "realtime_factor", "threads", "peak_rss_bytes", "bytes_per_vehicle",
    /// "cpu_us_per_vehicle_step", "run_us_per_vehicle_step", "phases_in_step", "cache_hints",
    /// "core_run_us_per_vehicle_step", "overhead_us_per_vehicle_step"} here (memory: resident
    /// bytes, the peak of the process before any core fleet and what each vehicle added; the
    /// rates of the median run; the process's CPU time over the plugin's runs).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Timed runs of --seconds each, one after another on the same fleet (at least 1):
    /// each run's figure is printed and the median run's is the result, which steadies the
    /// figures on a machine whose speed drifts between runs.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Time one scenario network instead (core simulation, no Bevy).
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// Steps for --scenario.
    #[arg(long, default_value_t = 100_000)]
    pub steps: u64,
    /// Do not write the part entities' states after each step (the vehicles' telemetry
    /// is still written): what a fleet that reads only the vehicle telemetry costs.
    #[arg(long)]
    pub no_part_states: bool,
    /// Whether the fleet's step hints the next vehicle toward the cache: auto (measure both,
    /// keep the faster), always or never (the plugin's `CacheHints`).
    #[arg(long, value_enum, default_value_t = Hints::Auto)]
    pub cache_hints: Hints,
    /// Also time the same cars as plain core vehicles (`driveline_core::fleet::Fleet`: no App,
    /// the same threads, cycle and cache hints), one core run beside each timed run of the
    /// plugin's fleet, the order alternating: what the plugin adds per vehicle-step on this
    /// machine is the median of the runs' differences (more runs steady it).
    #[arg(long)]
    pub against_core: bool,
}

/// `--cache-hints`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hints {
    /// Measure the step with and without, keep the faster.
    Auto,
    /// Always hint.
    Always,
    /// Never hint.
    Never,
}

impl Hints {
    /// The plugin's policy of this choice (a core fleet's is its `HintPolicy`, by `into`).
    fn policy(self) -> CacheHintPolicy {
        match self {
            Hints::Auto => CacheHintPolicy::Auto,
            Hints::Always => CacheHintPolicy::Always,
            Hints::Never => CacheHintPolicy::Never,
        }
    }
}

/// What a bench measured (the `--json` contract).
#[derive(serde::Serialize)]
pub struct BenchResult {
    pub vehicles: usize,
    pub steps: u64,
    pub vehicle_steps_per_s: f64,
    pub us_per_vehicle_step: f64,
    pub realtime_factor: f64,
    pub threads: usize,
    /// The process's peak resident memory at the end of the run, bytes (`VmHWM`; 0 where the
    /// system does not report it).
    pub peak_rss_bytes: u64,
    /// Resident memory the vehicles (or the scenario's simulation) added, from before the
    /// first was spawned to after the first step built their networks, per vehicle, bytes.
    pub bytes_per_vehicle: u64,
    /// Whether the vehicles' control and actuation ran inside their step (the plugin's
    /// `FusedVehicleSteps`; false for a scenario).
    pub phases_in_step: bool,
    /// Whether the fleet's step hinted the next vehicle toward the cache at the end (the
    /// plugin's `CacheHints::hinting`; false for a scenario).
    pub cache_hints: bool,
    /// The process's CPU time (user and system, all threads) over the timed runs, per
    /// vehicle-step, us: the cost to compare with one vehicle alone, whatever the thread count
    /// (0 where the system does not report it).
    pub cpu_us_per_vehicle_step: f64,
    /// Each timed run's wall time per vehicle-step, us, in the order run (one entry for a
    /// scenario); `us_per_vehicle_step` is their median's.
    pub run_us_per_vehicle_step: Vec<f64>,
    /// With `--against-core`: the core fleet's run beside each of `run_us_per_vehicle_step`,
    /// wall time per vehicle-step, us (empty without).
    pub core_run_us_per_vehicle_step: Vec<f64>,
    /// With `--against-core`: what the plugin adds per vehicle-step, the median over the runs
    /// of the plugin's run minus the core's beside it, us (`null` without).
    pub overhead_us_per_vehicle_step: Option<f64>,
}

/// The CPU time this process has used since [`CpuClock::start`], user and system over all its
/// threads ([`driveline_core::process::cpu_seconds`]).
struct CpuClock(Option<f64>);

impl CpuClock {
    fn start() -> Self {
        CpuClock(driveline_core::process::cpu_seconds())
    }

    /// Seconds of CPU since the start; 0 where the system does not report it.
    fn seconds(&self) -> f64 {
        self.0.zip(driveline_core::process::cpu_seconds()).map_or(0.0, |(a, b)| (b - a).max(0.0))
    }
}

/// The median of `values` (the lower middle one for an even count); `values` is not empty.
fn median(values: &[f64]) -> f64 {
    quantile(values, 0.5)
}

/// The value of `values` at fraction `q` of their sorted order (the lower one between two);
/// `values` is not empty.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    sorted[((sorted.len() - 1) as f64 * q.clamp(0.0, 1.0)).floor() as usize]
}

/// Each plugin run minus the core run beside it, us per vehicle-step (`--against-core`; empty
/// without).
pub fn differences(runs: &[f64], core_runs: &[f64]) -> Vec<f64> {
    runs.iter().zip(core_runs).map(|(p, c)| p - c).collect()
}

/// Runs the bench; prints and returns the figures.
pub fn bench(o: BenchOptions) -> Result<BenchResult, String> {
    if !(o.dt.is_finite() && o.dt > 0.0 && o.dt <= 0.05) {
        return Err(format!("--dt {}: the step must be in (0, 0.05] s", o.dt));
    }
    let threads = if o.threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { o.threads };
    if o.against_core && o.scenario.is_some() {
        return Err("--against-core times a fleet of vehicles against the core's; --scenario times one network".into());
    }
    let result = match &o.scenario {
        Some(path) => scenario(path, o.steps, o.dt, threads)?,
        None => fleet(&o, threads)?,
    };
    if let Some(p) = &o.json {
        let text = serde_json::to_string_pretty(&result).map_err(|e| e.to_string())?;
        std::fs::write(p, text + "\n").map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(result)
}

fn fleet(o: &BenchOptions, threads: usize) -> Result<BenchResult, String> {
    if o.vehicles == 0 {
        return Err("--vehicles 0: bench at least one vehicle".into());
    }
    if !(o.seconds.is_finite() && o.seconds > 0.0) {
        return Err(format!("--seconds {}: must be > 0", o.seconds));
    }
    if o.runs == 0 {
        return Err("--runs 0: time at least one run".into());
    }
    let cycle = crate::run::load_cycle(&o.cycle)?;
    // Loading resolves an automatic's gearbox file: the ECS gets a self-contained description.
    let spec = Vehicle::load(&o.vehicle).map_err(|e| e.to_string())?.spec().clone();
    let mut app = App::new();
    // Every thread computes: no IO or async pools are needed here.
    let none = || TaskPoolThreadAssignmentPolicy {
        min_threads: 0,
        max_threads: 0,
        percent: 0.0,
        on_thread_spawn: None,
        on_thread_destroy: None,
    };
    let options = TaskPoolOptions { io: none(), async_compute: none(), ..TaskPoolOptions::with_num_threads(threads) };
    app.add_plugins(TaskPoolPlugin { task_pool_options: options });
    app.add_plugins(DrivelinePlugins::default());
    app.insert_resource(CacheHints::new(o.cache_hints.policy()));
    // The fixed schedule is a short chain (the plugin's systems): its systems run where the
    // tick runs, without hand-offs to a worker, and spread their vehicles over the `threads`
    // compute threads themselves (more vehicle-steps per second than a multi-threaded executor;
    // see docs/performance.md).
    app.edit_schedule(FixedUpdate, |s| {
        s.set_executor(bevy_ecs::schedule::SingleThreadedExecutor::new());
    });
    let spread = cycle.duration();
    let cycle = std::sync::Arc::new(cycle);
    // (The plugin's schedules are built at the first tick: one empty tick first, so that the
    // memory measured below is the vehicles'.)
    app.world_mut().run_schedule(FixedUpdate);
    let rss_before = driveline_core::process::rss_bytes();
    for i in 0..o.vehicles {
        let root = spawn_vehicle(app.world_mut(), spec.clone(), Road::Body).map_err(|e| e.to_string())?;
        let offset = (i as f64 * SPACING) % spread;
        // Each car's driver runs in its step (`CycleDriver`), read at its own place on the trace.
        app.world_mut().entity_mut(root).insert(CycleDriver::new(&spec, cycle.clone()).starting_at(offset, true));
        if o.no_part_states {
            skip_write_back(app.world_mut(), root);
        }
    }
    let step = Duration::from_secs_f64(o.dt);
    let tick = |app: &mut App| {
        app.world_mut().resource_mut::<bevy_time::Time>().advance_by(step);
        app.world_mut().run_schedule(FixedUpdate);
    };
    // The first step builds every network.
    tick(&mut app);
    let bytes_per_vehicle = driveline_core::process::rss_bytes().saturating_sub(rss_before) / o.vehicles as u64;
    let steps = ((o.seconds / o.dt).round() as u64).max(1);
    let vehicle_steps = steps as f64 * o.vehicles as f64;
    // (Taken before a core fleet is built beside the plugin's: the plugin's own peak.)
    let peak_rss_bytes = driveline_core::process::peak_rss_bytes();
    let mut core = match o.against_core {
        true => Some(core_fleet(o, &spec, &cycle, threads)?),
        false => None,
    };
    let mut cpu_seconds = 0.0;
    let mut walls = Vec::with_capacity(o.runs);
    let mut core_walls = Vec::with_capacity(o.runs);
    for run in 0..o.runs {
        // (Every other run, the core's first: a machine whose speed drifts weighs on both.)
        if run % 2 == 1
            && let Some(fleet) = &mut core
        {
            core_walls.push(time_core(fleet, steps, threads));
        }
        let cpu = CpuClock::start();
        let start = Instant::now();
        for _ in 0..steps {
            tick(&mut app);
        }
        walls.push(start.elapsed().as_secs_f64().max(1e-9));
        cpu_seconds += cpu.seconds();
        if run % 2 == 0
            && let Some(fleet) = &mut core
        {
            core_walls.push(time_core(fleet, steps, threads));
        }
    }
    let wall = median(&walls);
    let per_step = |w: &f64| w / vehicle_steps * 1e6;
    let (runs, core_runs): (Vec<f64>, Vec<f64>) =
        (walls.iter().map(per_step).collect(), core_walls.iter().map(per_step).collect());
    let differences = differences(&runs, &core_runs);
    let phases_in_step = app.world().resource::<FusedVehicleSteps>().is_fused();
    let cache_hints = app.world().resource::<CacheHints>().hinting();
    Ok(BenchResult {
        vehicles: o.vehicles,
        steps,
        vehicle_steps_per_s: vehicle_steps / wall,
        us_per_vehicle_step: wall / vehicle_steps * 1e6,
        realtime_factor: steps as f64 * o.dt / wall,
        threads,
        peak_rss_bytes,
        bytes_per_vehicle,
        phases_in_step,
        cache_hints,
        cpu_us_per_vehicle_step: cpu_seconds / (vehicle_steps * o.runs as f64) * 1e6,
        run_us_per_vehicle_step: runs,
        core_run_us_per_vehicle_step: core_runs,
        overhead_us_per_vehicle_step: (!differences.is_empty()).then(|| median(&differences)),
    })
}

/// The cars of `o` as plain core vehicles in a [`Fleet`] (`--against-core`): the same
/// description, cycle, spacing and cache hints as the plugin's fleet, after one step (the
/// plugin's first tick, which builds the networks).
fn core_fleet(
    o: &BenchOptions,
    spec: &driveline_core::VehicleSpec,
    cycle: &std::sync::Arc<driveline_core::vehicle::driver::Cycle>,
    threads: usize,
) -> Result<Fleet, String> {
    let cars =
        (0..o.vehicles).map(|_| Vehicle::new(spec.clone()).map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    let drive = FleetDrive::Cycle { cycle: cycle.clone(), spacing: SPACING };
    let mut fleet = Fleet::new(cars, drive, o.dt).map_err(|e| e.to_string())?;
    fleet.set_hints(o.cache_hints.policy().into());
    fleet.run(1, threads);
    Ok(fleet)
}

/// One timed run of the core fleet, `steps` steps on `threads` threads: its wall time, s.
fn time_core(fleet: &mut Fleet, steps: u64, threads: usize) -> f64 {
    let start = Instant::now();
    fleet.run(steps, threads);
    start.elapsed().as_secs_f64().max(1e-9)
}

fn scenario(path: &std::path::Path, steps: u64, dt: f64, threads: usize) -> Result<BenchResult, String> {
    if steps == 0 {
        return Err("--steps 0: time at least one step".into());
    }
    let rss_before = driveline_core::process::rss_bytes();
    let (_, net) = Scenario::load_network(path).map_err(|e| e.to_string())?;
    let mut sim = Simulation::new(net);
    let bytes_per_vehicle = driveline_core::process::rss_bytes().saturating_sub(rss_before);
    sim.step(dt).map_err(|e| e.to_string())?;
    let cpu = CpuClock::start();
    let start = Instant::now();
    for _ in 0..steps {
        sim.step(dt).map_err(|e| e.to_string())?;
    }
    let wall = start.elapsed().as_secs_f64().max(1e-9);
    Ok(BenchResult {
        vehicles: 1,
        steps,
        vehicle_steps_per_s: steps as f64 / wall,
        us_per_vehicle_step: wall / steps as f64 * 1e6,
        realtime_factor: steps as f64 * dt / wall,
        threads: threads.min(1),
        peak_rss_bytes: driveline_core::process::peak_rss_bytes(),
        bytes_per_vehicle,
        phases_in_step: false,
        cache_hints: false,
        cpu_us_per_vehicle_step: cpu.seconds() / steps as f64 * 1e6,
        run_us_per_vehicle_step: vec![wall / steps as f64 * 1e6],
        core_run_us_per_vehicle_step: Vec::new(),
        overhead_us_per_vehicle_step: None,
    })
}
