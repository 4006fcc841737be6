//! `driveline`: simulate and check scenario, vehicle and gearbox files, print gear ratios, and
//! run vehicles over drive cycles, from the command line.

/// `println!` that ends the process quietly when standard output has been closed (a reader
/// such as `head` took what it wanted) instead of panicking; any other write error is reported
/// and exits with 1.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout().lock(), $($t)*) {
            crate::stdout_failed(e);
        }
    }};
}

/// Where [`say`] goes when standard output cannot be written.
fn stdout_failed(e: std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("cannot write to standard output: {e}");
    std::process::exit(1);
}

mod bench;
mod drive;
mod run;
mod soak;

use clap::{Parser, Subcommand};
use driveline_core::automatic::GearboxSpec;
use driveline_core::{CsvRecorder, Scenario, Simulation, Vehicle};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Driveline: Modelica-grade driveline simulation at fixed time steps.
#[derive(Parser)]
#[command(name = "driveline", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a scenario and write CSV (stdout unless --out).
    Simulate {
        /// Scenario file (RON).
        scenario: PathBuf,
        /// Fixed step, s.
        #[arg(long, allow_negative_numbers = true, default_value_t = 1e-3)]
        dt: f64,
        /// End time, s (default: the scenario's t_end).
        #[arg(long, allow_negative_numbers = true)]
        t_end: Option<f64>,
        /// CSV output file.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Mode-change events CSV: time,element,from_mode,to_mode.
        #[arg(long)]
        events: Option<PathBuf>,
        /// Write the output even when it would pass the size limit (`MAX_OUTPUT_ROWS` rows or
        /// `MAX_OUTPUT_BYTES` bytes, estimated before the run).
        #[arg(long)]
        force: bool,
    },
    /// Validate a scenario, vehicle or gearbox file: exit 0 if valid, 2 with messages if not.
    Check {
        /// Scenario (`Scenario(...)`), vehicle (`Vehicle(...)`) or gearbox (`Gearbox(...)`) file (RON).
        file: PathBuf,
    },
    /// Drive a vehicle over a drive cycle with the driver model: telemetry CSV, plots, summary.
    Run {
        /// Vehicle file (RON).
        vehicle: PathBuf,
        /// Cycle: udds, hwfet, us06, nedc, wltc3b, ftp75, artemis_urban, artemis_rural,
        /// artemis_motorway130, artemis_motorway150, or a `time_s,speed_mps` CSV file.
        #[arg(long)]
        cycle: String,
        /// Fixed step, s.
        #[arg(long, allow_negative_numbers = true, default_value_t = 1e-3)]
        dt: f64,
        /// Telemetry CSV (every signal).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Telemetry rows per simulated second.
        #[arg(long, allow_negative_numbers = true, default_value_t = 100.0)]
        rate: f64,
        /// Plot of speed against the trace, engine speed, gear and clutch (.svg or .png).
        #[arg(long)]
        plot: Option<PathBuf>,
        /// Summary JSON: distance_km, duration_s, rms_speed_error_kmh, max_speed_error_kmh,
        /// shifts, stalls, fuel_l, energy_dissipated_kj, realtime_factor, steps, ...
        #[arg(long)]
        summary_json: Option<PathBuf>,
        /// Stream telemetry over UDP to this address (packet layout in
        /// `driveline_core::vehicle::udp`).
        #[arg(long)]
        udp: Option<std::net::SocketAddr>,
        /// UDP packets per simulated second.
        #[arg(long, allow_negative_numbers = true, default_value_t = 60.0)]
        udp_rate: f64,
        /// Write the telemetry CSV even when it would pass the size limit (`MAX_OUTPUT_ROWS`
        /// rows or `MAX_OUTPUT_BYTES` bytes, estimated before the run).
        #[arg(long)]
        force: bool,
    },
    /// Benchmark: N vehicles in one headless Bevy App following a cycle, stepped in parallel;
    /// or one scenario network with --scenario.
    Bench(bench::BenchOptions),
    /// Soak: many vehicles of every shipped kind over mixed drive cycles for a long simulated
    /// time, with the energy ledger on. Fails (exit 1) on any step error, non-finite telemetry,
    /// an energy-ledger residual past 1e-9 of its scale, or resident memory growing after the
    /// first simulated minute (`driveline_cli::soak` docs). Not run in CI: an hour of 400 cars
    /// takes minutes.
    Soak {
        /// Directory of vehicle files: every `.ron` in it is one kind.
        #[arg(long, default_value = "assets/vehicles")]
        vehicles: PathBuf,
        /// Vehicles of each kind.
        #[arg(long, default_value_t = 100)]
        per_kind: usize,
        /// Simulated seconds.
        #[arg(long, allow_negative_numbers = true, default_value_t = 3600.0)]
        seconds: f64,
        /// Fixed step, s (default: a 60 Hz game step).
        #[arg(long, allow_negative_numbers = true, default_value_t = 1.0 / 60.0)]
        dt: f64,
        /// Worker threads (0: one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Write the figures here as JSON (`SoakResult`: rss_bytes per minute, per-kind errors,
        /// ledger residuals, distance, throughput, passed, failures).
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Drive a vehicle in real time: paced to the wall clock at --hz, from live input (UDP, a
    /// gamepad) or a recorded input CSV, streaming telemetry over UDP; the loop's health at the
    /// end (the input packet and the health figures: `driveline_cli::drive` docs, README).
    Drive {
        /// What to drive and how.
        #[command(flatten)]
        options: drive::DriveOptions,
        /// Loop health and the final state as JSON: steps, compute and lateness (p50, p99,
        /// max, us), missed deadlines, UDP packets in, dropped and out, input age, CPU share.
        #[arg(long)]
        summary_json: Option<PathBuf>,
    },
    /// Print the gear ratios of a planetary gearbox, computed from its kinematics, as CSV
    /// `gear,ratio` (input speed / output speed, reverse negative, 4 decimals).
    Ratios {
        /// Gearbox file (RON).
        gearbox: PathBuf,
        /// Also print, per gear, the torque each closed element carries per N m of input
        /// torque and its capacity at full pressure (CSV `gear,element,torque_per_input,capacity_nm`).
        #[arg(long)]
        elements: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check { file } => match check(&file) {
            Ok(summary) => {
                say!("{}: ok: {summary}", file.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(2)
            }
        },
        Command::Drive { options, summary_json } => match drive::drive(options) {
            Ok(summary) => {
                let text = serde_json::to_string_pretty(&summary).unwrap_or_default();
                say!("{text}");
                if let Some(p) = summary_json
                    && let Err(e) = std::fs::write(&p, text)
                {
                    eprintln!("{}: {e}", p.display());
                    return ExitCode::from(2);
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(2)
            }
        },
        Command::Run { vehicle, cycle, dt, out, rate, plot, summary_json, udp, udp_rate, force } => {
            match run::run(run::RunOptions { vehicle, cycle, dt, out, rate, plot, summary_json, udp, udp_rate, force })
            {
                Ok(s) => {
                    say!(
                        "{} on {}: {:.2} km in {:.0} s, rms speed error {:.2} km/h (max {:.1}), {} shifts, {} stalls, {:.0}x real time",
                        s.vehicle,
                        s.cycle,
                        s.distance_km,
                        s.duration_s,
                        s.rms_speed_error_kmh,
                        s.max_speed_error_kmh,
                        s.shifts,
                        s.stalls,
                        s.realtime_factor
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Bench(o) => {
            let timed_scenario = o.scenario.is_some();
            let part_states = !o.no_part_states;
            match bench::bench(o) {
                Ok(r) => {
                    say!(
                        "{} vehicle(s) x {} steps on {} thread(s): {:.0} vehicle-steps/s, {:.2} us per vehicle-step, {:.2}x real time{}",
                        r.vehicles,
                        r.steps,
                        r.threads,
                        r.vehicle_steps_per_s,
                        r.us_per_vehicle_step,
                        r.realtime_factor,
                        if part_states { "" } else { " (part states not written)" }
                    );
                    if r.cpu_us_per_vehicle_step > 0.0 {
                        say!("CPU time: {:.2} us per vehicle-step (all threads)", r.cpu_us_per_vehicle_step);
                    }
                    if r.run_us_per_vehicle_step.len() > 1 {
                        let runs: Vec<String> = r.run_us_per_vehicle_step.iter().map(|u| format!("{u:.2}")).collect();
                        say!("runs: {} us per vehicle-step (the median above)", runs.join(", "));
                    }
                    if let Some(overhead) = r.overhead_us_per_vehicle_step {
                        let core: Vec<String> =
                            r.core_run_us_per_vehicle_step.iter().map(|u| format!("{u:.2}")).collect();
                        let differences =
                            bench::differences(&r.run_us_per_vehicle_step, &r.core_run_us_per_vehicle_step);
                        say!("core fleet beside each run: {} us per vehicle-step", core.join(", "));
                        say!(
                            "the plugin adds {overhead:.3} us per vehicle-step (median of {} runs; quartiles {:.3} and {:.3}, from {:.3} to {:.3})",
                            differences.len(),
                            bench::quantile(&differences, 0.25),
                            bench::quantile(&differences, 0.75),
                            bench::quantile(&differences, 0.0),
                            bench::quantile(&differences, 1.0),
                        );
                    }
                    if !timed_scenario && r.vehicles >= 2 {
                        let how = if r.cache_hints { "on" } else { "off" };
                        say!("cache hints: {how} at the end (see CacheHints)");
                    }
                    if !timed_scenario && !r.phases_in_step {
                        say!("the vehicles' control and actuation ran as systems of their own (see FusedVehicleSteps)");
                    }
                    if r.peak_rss_bytes > 0 {
                        say!(
                            "resident memory: {:.0} KiB per vehicle, {:.1} MiB at the peak",
                            r.bytes_per_vehicle as f64 / 1024.0,
                            r.peak_rss_bytes as f64 / (1024.0 * 1024.0)
                        );
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Soak { vehicles, per_kind, seconds, dt, threads, json } => {
            match soak::soak(soak::SoakOptions { vehicles, per_kind, seconds, dt, threads, json }) {
                Ok(r) => {
                    for k in &r.kinds {
                        say!(
                            "{}: {} vehicles, {:.0} km, {:.1} MJ dissipated, {} step errors, {} non-finite, ledger residual {:.1e}",
                            k.vehicle,
                            k.vehicles,
                            k.distance_km,
                            k.dissipated_mj,
                            k.step_errors,
                            k.non_finite,
                            k.max_ledger_residual
                        );
                    }
                    let mib = |b: u64| b as f64 / (1 << 20) as f64;
                    say!(
                        "{} vehicles x {:.0} s at {:.4} s: {} vehicle-steps in {:.0} s ({:.0}/s on {} threads); RSS {:.1} MiB at start, {:.1} after minute 1, {:.1} at most after, {:.1} at the end",
                        r.vehicles,
                        r.seconds,
                        r.dt,
                        r.vehicle_steps,
                        r.wall_s,
                        r.vehicle_steps_per_s,
                        r.threads,
                        mib(r.rss_start_bytes),
                        mib(r.rss_bytes.first().copied().unwrap_or(0)),
                        mib(r.rss_bytes.iter().skip(1).copied().max().unwrap_or(0)),
                        mib(r.rss_bytes.last().copied().unwrap_or(0)),
                    );
                    for f in &r.failures {
                        say!("FAILED: {f}");
                    }
                    if r.passed { ExitCode::SUCCESS } else { ExitCode::from(1) }
                }
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Ratios { gearbox, elements } => match GearboxSpec::load_analysed(&gearbox) {
            Ok((spec, gears)) => {
                say!("gear,ratio");
                for g in GearboxSpec::driving_gears(&gears) {
                    say!("{},{:.4}", g.name, g.ratio);
                }
                if elements {
                    say!();
                    say!("gear,element,torque_per_input,capacity_nm");
                    for g in GearboxSpec::driving_gears(&gears) {
                        for (k, tf) in g.closed.iter().zip(&g.torque_factors) {
                            let e = &spec.elements[*k];
                            say!("{},{},{:.4},{:.0}", g.name, e.name, tf, e.capacity());
                        }
                    }
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(2)
            }
        },
        Command::Simulate { scenario, dt, t_end, out, events, force } => {
            match simulate(scenario, dt, t_end, out, events, force) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

/// Validates a scenario or vehicle file: a one-line summary, or the positioned error.
fn check(file: &std::path::Path) -> Result<String, String> {
    if file_kind(file) == "Gearbox" {
        let (g, gears) = GearboxSpec::load_analysed(file).map_err(|e| e.to_string())?;
        return Ok(format!(
            "gearbox '{}', {} sets, {} shift elements, {} gears",
            g.name,
            g.sets.len(),
            g.elements.len(),
            gears.len()
        ));
    }
    if file_kind(file) == "Vehicle" {
        let v = Vehicle::load(file).map_err(|e| e.to_string())?;
        let net = v.simulation().network();
        let gears = match v.tcu() {
            Some(t) => format!("automatic, {} forward gears", t.forward_gears()),
            None => format!("{} gears", v.layout().gears.len()),
        };
        Ok(format!(
            "vehicle '{}', {gears}, {} elements, {} free coordinates, {} friction elements",
            v.spec().name,
            net.elements.len(),
            net.n_dof,
            net.friction.len()
        ))
    } else {
        let (sc, net) = Scenario::load_network(file).map_err(|e| e.to_string())?;
        Ok(format!(
            "'{}', {} elements, {} free coordinates, {} friction elements",
            sc.name,
            net.elements.len(),
            net.n_dof,
            net.friction.len()
        ))
    }
}

/// The first word of a file after comments: `Scenario`, `Vehicle`, `Gearbox`.
fn file_kind(path: &std::path::Path) -> String {
    let Ok(text) = std::fs::read_to_string(path) else { return String::new() };
    let mut rest = text.as_str();
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix("//") {
            rest = r.split_once('\n').map_or("", |x| x.1);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.split_once("*/").map_or("", |x| x.1);
        } else {
            return rest.chars().take_while(|c| c.is_alphanumeric()).collect();
        }
    }
}

/// The most rows `simulate` and `run` write without `--force` (a 1 ms run of about 83
/// minutes).
pub const MAX_OUTPUT_ROWS: u64 = 5_000_000;
/// The most bytes of CSV `simulate` and `run` write without `--force`, estimated before the
/// run at [`BYTES_PER_VALUE`] a value: 1 GiB.
pub const MAX_OUTPUT_BYTES: u64 = 1 << 30;
/// The size of one CSV value in the estimate, bytes (a full-precision float and its comma).
pub const BYTES_PER_VALUE: u64 = 22;

/// Refuses an output of `rows` rows of `columns` values past the limits, unless `force`.
pub fn check_output_size(what: &str, rows: u64, columns: usize, force: bool) -> Result<(), String> {
    let bytes = rows.saturating_mul(columns as u64).saturating_mul(BYTES_PER_VALUE);
    if force || (rows <= MAX_OUTPUT_ROWS && bytes <= MAX_OUTPUT_BYTES) {
        return Ok(());
    }
    Err(format!(
        "{what} would be {rows} rows of {columns} columns (about {:.1} GB); the limit is {MAX_OUTPUT_ROWS} rows and \
         {:.1} GB: take a longer step, a shorter run or a lower rate, or pass --force",
        bytes as f64 / 1e9,
        MAX_OUTPUT_BYTES as f64 / 1e9
    ))
}

/// A progress bar on stderr when it is a terminal (hidden otherwise), for `steps` steps.
pub fn progress(steps: u64, message: String) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(steps);
    b.set_style(
        indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {percent}% {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    b.set_message(message);
    b
}

fn simulate(
    path: PathBuf,
    dt: f64,
    t_end: Option<f64>,
    out: Option<PathBuf>,
    events: Option<PathBuf>,
    force: bool,
) -> Result<(), String> {
    if !(dt.is_finite() && dt > 0.0) {
        return Err(format!("--dt {dt}: the step must be a finite number > 0 s"));
    }
    let (sc, net) = Scenario::load_network(&path).map_err(|e| e.to_string())?;
    let t_end = t_end.unwrap_or(sc.t_end);
    if !(t_end.is_finite() && t_end >= 0.0) {
        return Err(format!("--t-end {t_end}: must be a finite time >= 0 s"));
    }
    let mut sim = Simulation::new(net);
    let rec = CsvRecorder::new(&sim);
    let steps = (t_end / dt - 1e-9).ceil().max(0.0);
    if steps >= u64::MAX as f64 {
        return Err(format!("--t-end {t_end} at --dt {dt} is more steps than can be counted"));
    }
    let steps = steps as u64;
    check_output_size("the CSV", steps + 1, rec.names().len(), force)?;
    let sink: Box<dyn Write> = match &out {
        Some(p) => Box::new(std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut w = BufWriter::with_capacity(1 << 16, sink);
    let mut ev_out = match &events {
        Some(p) => {
            let mut f = BufWriter::new(std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?);
            writeln!(f, "time,element,from_mode,to_mode").map_err(|e| e.to_string())?;
            Some(f)
        }
        None => None,
    };
    let io = |e: std::io::Error| e.to_string();
    rec.header(&mut w).map_err(io)?;
    rec.row(&sim, &mut w).map_err(io)?;
    // (Redrawn at most every 1/20 s, shown only on a terminal and for a run of over a second.)
    let bar = progress(steps, path.display().to_string());
    bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    let started = std::time::Instant::now();
    for k in 1..=steps {
        // Step to k*dt exactly (no accumulated rounding in the time grid).
        let target = (k as f64 * dt).min(t_end);
        sim.step(target - sim.time()).map_err(|e| e.to_string())?;
        if k.is_multiple_of(1024) {
            if bar.is_hidden()
                && started.elapsed().as_secs_f64() > 1.0
                && std::io::IsTerminal::is_terminal(&std::io::stderr())
            {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
            bar.set_position(k);
        }
        rec.row(&sim, &mut w).map_err(io)?;
        if let Some(f) = ev_out.as_mut() {
            for e in sim.events() {
                let name = &sim.network().elements[e.element].name;
                writeln!(f, "{},{},{},{}", e.time, name, e.from.code(), e.to.code()).map_err(io)?;
            }
        }
    }
    bar.finish_and_clear();
    w.flush().map_err(io)?;
    if let Some(mut f) = ev_out {
        f.flush().map_err(io)?;
    }
    Ok(())
}
