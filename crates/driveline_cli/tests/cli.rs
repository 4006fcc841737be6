//! The `driveline` command line contract: `check` rejects every invalid scenario with exit code 2
//! and a `file:line:col` message, accepts the shipped ones, and `simulate` writes the CSV layout.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn driveline(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_driveline")).args(args).current_dir(root()).output().expect("run driveline")
}

/// Runs `check` on every file of `dir`: each must exit 2 with `file:line:col: message`, never
/// a panic; with `placed`, past line 1 (at the offending key, every file starts with a comment).
/// Returns how many files there were.
fn check_rejects_all(dir: &str, placed: bool) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(root().join(dir)).unwrap() {
        let path = entry.unwrap().path();
        let out = driveline(&["check", path.to_str().unwrap()]);
        let msg = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{} was accepted: {msg}", path.display());
        let file = path.display().to_string();
        let rest = msg.strip_prefix(&format!("{file}:")).unwrap_or_else(|| panic!("no position in: {msg}"));
        let line: usize = rest.split(':').next().unwrap().parse().unwrap();
        assert!(line > usize::from(placed), "{}: message not placed: {msg}", path.display());
        assert!(!msg.contains("panicked"), "{msg}");
        n += 1;
    }
    n
}

#[test]
fn check_rejects_every_invalid_scenario_with_a_position() {
    let n = check_rejects_all("tests/scenarios/invalid", false);
    assert!(n >= 20, "only {n} invalid files");
}

#[test]
fn check_rejects_every_invalid_vehicle_with_a_position() {
    let n = check_rejects_all("tests/vehicles/invalid", true);
    assert!(n >= 15, "only {n} invalid vehicle files");
}

#[test]
fn check_accepts_the_shipped_vehicles() {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(root().join("assets/vehicles")).unwrap().map(|e| e.unwrap().path()).collect();
    files.push(root().join("tests/vehicles/valid_small.ron"));
    assert!(files.len() >= 4);
    for f in files {
        let out = driveline(&["check", f.to_str().unwrap()]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}: {}", f.display(), String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("ok: vehicle"), "{text}");
    }
}

#[test]
fn check_accepts_the_shipped_scenarios() {
    let mut files: Vec<PathBuf> = ["assets/scenarios/msl", "assets/scenarios/elements"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root().join(d)).unwrap().map(|e| e.unwrap().path()))
        .collect();
    files.push(root().join("tests/scenarios/valid_control.ron"));
    for f in files {
        let out = driveline(&["check", f.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}: {}", f.display(), String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn simulate_writes_the_csv_contract() {
    let dir = std::env::temp_dir().join(format!("driveline-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("cc.csv");
    let ev = dir.join("ev.csv");
    let out = driveline(&[
        "simulate",
        "assets/scenarios/msl/CoupledClutches.ron",
        "--dt",
        "0.01",
        "--out",
        csv.to_str().unwrap(),
        "--events",
        ev.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("time,J1.phi,J1.w,clutch1.phi_rel,clutch1.w_rel,clutch1.tau,clutch1.mode,J2.phi"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 151, "one row at t = 0 and one per step to 1.5 s");
    assert!(rows[150].starts_with("1.5,"));
    let events = std::fs::read_to_string(&ev).unwrap();
    assert!(events.starts_with("time,element,from_mode,to_mode\n0.4,clutch2,2,-1\n"), "{events}");
    let bad = driveline(&["simulate", "assets/scenarios/msl/CoupledClutches.ron", "--dt", "-1"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn check_rejects_every_invalid_gearbox_with_a_position() {
    let n = check_rejects_all("tests/gearboxes/invalid", true);
    assert!(n >= 10, "only {n} invalid gearbox files");
}

#[test]
fn ratios_prints_the_kinematic_gear_ratios_of_every_shipped_gearbox() {
    for entry in std::fs::read_dir(root().join("assets/gearboxes")).unwrap() {
        let path = entry.unwrap().path();
        let out = driveline(&["ratios", path.to_str().unwrap()]);
        assert!(out.status.success(), "{}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("gear,ratio"));
        let rows: Vec<(String, f64)> = lines
            .map(|l| {
                let (g, r) = l.split_once(',').unwrap();
                assert_eq!(r.split_once('.').map(|x| x.1.len()), Some(4), "4 decimals: {l}");
                (g.to_string(), r.parse().unwrap())
            })
            .collect();
        assert_eq!(rows[0].0, "1");
        // Forward ratios fall gear by gear; reverse is negative.
        let fwd: Vec<f64> = rows.iter().filter(|r| !r.0.starts_with('R')).map(|r| r.1).collect();
        assert!(fwd.windows(2).all(|w| w[1] < w[0]), "{}: {rows:?}", path.display());
        assert!(rows.iter().filter(|r| r.0.starts_with('R')).all(|r| r.1 < 0.0));
    }
    let out = driveline(&["ratios", "assets/gearboxes/zf_8hp70.ron"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "gear,ratio\n1,4.6957\n2,3.1304\n3,2.1039\n4,1.6667\n5,1.2845\n6,1.0000\n7,0.8392\n8,0.6667\nR,-3.2968\n"
    );
    let bad = driveline(&["ratios", "tests/gearboxes/invalid/gear_over_constrained.ron"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("over-constrained"));
}

#[test]
fn run_writes_telemetry_plots_and_a_stable_summary() {
    let dir = std::env::temp_dir().join(format!("driveline-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A short trace: pull away, cruise at 30 km/h, stop.
    let cycle = dir.join("short.csv");
    let mut text = String::from("time_s,speed_mps\n");
    for t in 0..=40 {
        let v = match t {
            0..=2 => 0.0,
            3..=12 => (t - 2) as f64 * 0.833,
            13..=28 => 8.33,
            29..=37 => 8.33 - (t - 28) as f64 * 0.925,
            _ => 0.0,
        };
        text.push_str(&format!("{t},{}\n", v.max(0.0)));
    }
    std::fs::write(&cycle, text).unwrap();
    for vehicle in ["assets/vehicles/sedan_8hp.ron", "assets/vehicles/nissan_350z.ron"] {
        let (csv, svg, png, json) = (dir.join("t.csv"), dir.join("p.svg"), dir.join("p.png"), dir.join("s.json"));
        for plot in [&svg, &png] {
            let out = driveline(&[
                "run",
                vehicle,
                "--cycle",
                cycle.to_str().unwrap(),
                "--out",
                csv.to_str().unwrap(),
                "--plot",
                plot.to_str().unwrap(),
                "--summary-json",
                json.to_str().unwrap(),
            ]);
            assert!(out.status.success(), "{vehicle}: {}", String::from_utf8_lossy(&out.stderr));
            assert!(std::fs::metadata(plot).unwrap().len() > 10_000, "{} is empty", plot.display());
        }
        let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        // The schema other tools read.
        for key in [
            "vehicle",
            "cycle",
            "distance_km",
            "cycle_distance_km",
            "duration_s",
            "rms_speed_error_kmh",
            "max_speed_error_kmh",
            "shifts",
            "stalls",
            "fuel_l",
            "energy_dissipated_kj",
            "realtime_factor",
            "steps",
            "dt",
        ] {
            assert!(summary.get(key).is_some(), "{vehicle}: no `{key}` in {summary}");
        }
        assert_eq!(summary["steps"], 40_000);
        assert!(summary["energy_dissipated_kj"].is_object());
        assert!(summary["rms_speed_error_kmh"].as_f64().unwrap() < 2.0, "{summary}");
        let telemetry = std::fs::read_to_string(&csv).unwrap();
        let mut lines = telemetry.lines();
        assert!(lines.next().unwrap().starts_with("time,target_kmh,speed_kmh,"));
        assert_eq!(lines.count(), 4000, "100 rows per simulated second");
    }
    let bad = driveline(&["run", "assets/vehicles/sedan_8hp.ron", "--cycle", "nowhere"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a built-in cycle"));
}

#[test]
fn bench_times_a_fleet_and_a_scenario_and_writes_its_json() {
    let dir = std::env::temp_dir().join(format!("driveline-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("b.json");
    // A bench of three sedans on two threads, three runs, with `args`: its output and its JSON.
    let bench = |args: &[&str]| {
        let mut all = vec!["bench", "--vehicles", "3", "--threads", "2", "--runs", "3", "--json"];
        all.push(json.to_str().unwrap());
        all.extend_from_slice(args);
        let out = driveline(&all);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (out, v)
    };
    let (_, v) = bench(&["--vehicle", "assets/vehicles/sedan_8hp.ron", "--seconds", "0.05", "--cache-hints", "never"]);
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut contract = [
        "vehicles",
        "steps",
        "vehicle_steps_per_s",
        "us_per_vehicle_step",
        "realtime_factor",
        "threads",
        "peak_rss_bytes",
        "bytes_per_vehicle",
        "phases_in_step",
        "cache_hints",
        "cpu_us_per_vehicle_step",
        "run_us_per_vehicle_step",
        "core_run_us_per_vehicle_step",
        "overhead_us_per_vehicle_step",
    ];
    contract.sort_unstable();
    assert_eq!(keys, contract, "the JSON contract: exactly these keys");
    assert_eq!(v["vehicles"], 3);
    // The bench's drivers sample before the controllers: the phases run in the step.
    assert_eq!(v["phases_in_step"], true);
    assert_eq!(v["cache_hints"], false, "--cache-hints never");
    assert_eq!(v["steps"], 50);
    assert_eq!(v["threads"], 2);
    assert!(v["vehicle_steps_per_s"].as_f64().unwrap() > 0.0);
    // Three runs, the result their median's (the same division of the same numbers, and JSON
    // numbers round-trip exactly: equal bits).
    let mut runs: Vec<f64> =
        v["run_us_per_vehicle_step"].as_array().unwrap().iter().map(|r| r.as_f64().unwrap()).collect();
    assert_eq!(runs.len(), 3);
    runs.sort_unstable_by(f64::total_cmp);
    assert_eq!(v["us_per_vehicle_step"].as_f64().unwrap().to_bits(), runs[1].to_bits(), "{runs:?}");
    // CPU time, where the system reports it: stepping takes some (a 10 ms tick resolution, so
    // only its sign is checked over this short a run).
    if std::path::Path::new("/proc/self/stat").exists() {
        assert!(v["cpu_us_per_vehicle_step"].as_f64().unwrap() >= 0.0);
    }
    // Resident memory, where the system reports it (Linux): with three sedans the first one's
    // build of what they share counts too (over 100 kB each; about 63 KiB a car in a fleet of a
    // thousand), and the process is at least the three of them.
    if std::path::Path::new("/proc/self/status").exists() {
        let (peak, per) = (v["peak_rss_bytes"].as_u64().unwrap(), v["bytes_per_vehicle"].as_u64().unwrap());
        assert!(per > 100_000 && peak > 3 * per, "peak {peak}, per vehicle {per}");
    }
    // No core fleet asked for: none timed.
    assert_eq!(v["core_run_us_per_vehicle_step"].as_array().map(Vec::len), Some(0));
    assert!(v["overhead_us_per_vehicle_step"].is_null());
    // `--against-core`: a core run beside each of the plugin's, and the plugin's overhead the
    // median of the three differences, recomputed from the JSON's numbers (serde_json's default
    // parse of a number is within a few ulps, not exact: a difference of two parsed numbers of
    // about a microsecond may differ from the parsed difference by a few times 1e-16 us).
    let (out, v) = bench(&["--seconds", "0.02", "--against-core"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("the plugin adds"));
    let list = |key: &str| -> Vec<f64> { v[key].as_array().unwrap().iter().map(|r| r.as_f64().unwrap()).collect() };
    let (plugin, core) = (list("run_us_per_vehicle_step"), list("core_run_us_per_vehicle_step"));
    assert_eq!(core.len(), 3);
    assert!(core.iter().all(|c| c.is_finite() && *c > 0.0), "{core:?}");
    let mut differences: Vec<f64> = plugin.iter().zip(&core).map(|(p, c)| p - c).collect();
    differences.sort_unstable_by(f64::total_cmp);
    let overhead = v["overhead_us_per_vehicle_step"].as_f64().unwrap();
    let scale = plugin.iter().chain(&core).fold(1.0f64, |m, x| m.max(x.abs()));
    assert!((overhead - differences[1]).abs() <= 1e-12 * scale, "{overhead} against {differences:?}");
    let both = driveline(&["bench", "--scenario", "assets/scenarios/msl/CoupledClutches.ron", "--against-core"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&both.stderr).contains("--against-core times a fleet"));
    let sc = driveline(&["bench", "--scenario", "assets/scenarios/msl/CoupledClutches.ron", "--steps", "1000"]);
    assert!(sc.status.success(), "{}", String::from_utf8_lossy(&sc.stderr));
    assert!(String::from_utf8_lossy(&sc.stdout).contains("us per vehicle-step"));
    let bad = driveline(&["bench", "--vehicles", "0"]);
    assert_eq!(bad.status.code(), Some(2));
    let no_runs = driveline(&["bench", "--vehicles", "1", "--runs", "0"]);
    assert_eq!(no_runs.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_runs.stderr).contains("--runs 0"));
}

/// `drive` paced at 1 kHz from a recorded input file gives the same run, bit for bit, as the same
/// inputs stepped without pacing; its recording replays bit for bit; the health is reported.
#[test]
fn drive_in_real_time_equals_the_unpaced_run_bit_for_bit() {
    let dir = std::env::temp_dir().join(format!("driveline_drive_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.csv");
    std::fs::write(&input, "time,throttle,brake,selector\n0,0,1,D\n0.3,0.5,0,D\n1.2,1.0,0,D\n2.2,0.2,0.3,D\n").unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let run = |extra: &[&str], record: &Path, summary: &Path| {
        let mut args = vec!["drive", "assets/vehicles/sedan_8hp.ron", "--duration", "2.5"];
        args.extend_from_slice(extra);
        let (rec, sum) = (s(record), s(summary));
        args.extend_from_slice(&["--record", &rec, "--summary-json", &sum]);
        let out = driveline(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap();
        (std::fs::read_to_string(record).unwrap(), summary)
    };
    let inp = s(&input);
    let (paced, ps) = run(&["--input-csv", &inp], &dir.join("a.csv"), &dir.join("a.json"));
    let (fast, fs) = run(&["--input-csv", &inp, "--no-pacing"], &dir.join("b.csv"), &dir.join("b.json"));
    assert_eq!(paced, fast, "the paced run differs from the unpaced one");
    assert_eq!(ps["final"], fs["final"]);
    assert_eq!(ps["steps"], 2500);
    assert!(ps["final"]["speed"].as_f64().unwrap() > 1.0, "{ps}");
    // Paced: 2.5 s of wall time for 2.5 s simulated, with the health figures.
    let wall = ps["wall_s"].as_f64().unwrap();
    assert!((2.4..10.0).contains(&wall), "wall {wall} s");
    for key in ["p50_us", "p99_us", "max_us"] {
        assert!(ps["lateness"][key].as_f64().is_some() && ps["compute"][key].as_f64().is_some(), "{ps}");
    }
    assert!(ps["missed_deadlines"].as_u64().is_some());
    // The recording replays bit for bit.
    let rec = s(&dir.join("a.csv"));
    let (replay, rs) = run(&["--input-csv", &rec, "--no-pacing"], &dir.join("c.csv"), &dir.join("c.json"));
    assert_eq!(replay, paced);
    assert_eq!(rs["final"], ps["final"]);
}

/// `drive` from UDP applies well-formed input packets, drops and counts malformed ones, and
/// refuses nonsense options with a message.
#[test]
fn drive_from_udp_drops_malformed_packets_and_counts_them() {
    let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let child = Command::new(env!("CARGO_BIN_EXE_driveline"))
        .args(["drive", "assets/vehicles/nissan_350z.ron", "--input-udp", &addr, "--duration", "1.5"])
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    // A valid packet: clutch floored, first gear, ignition on (version 1, 32 bytes).
    let packet = |seq: u32, clutch: f32| {
        let mut b = [0u8; 32];
        b[0..4].copy_from_slice(b"DRVI");
        b[4..6].copy_from_slice(&1u16.to_le_bytes());
        b[6..8].copy_from_slice(&32u16.to_le_bytes());
        b[8..12].copy_from_slice(&seq.to_le_bytes());
        b[20..24].copy_from_slice(&clutch.to_le_bytes());
        b[28] = 1;
        b[29] = 3;
        b[30..32].copy_from_slice(&4u16.to_le_bytes());
        b
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    for seq in 1..=10u32 {
        sender.send_to(&packet(seq, 1.0), &addr).unwrap();
        sender.send_to(&packet(seq, f32::NAN), &addr).unwrap(); // non-finite: dropped
        sender.send_to(&[0u8; 7], &addr).unwrap(); // wrong size: dropped
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["udp_in"], 10, "{summary}");
    assert_eq!(summary["udp_dropped"], 20, "{summary}");
    assert!(summary["input_age"]["max_us"].as_f64().is_some(), "{summary}");
    let bad = driveline(&["drive", "assets/vehicles/nissan_350z.ron", "--hz", "-1", "--input-udp", &addr]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--hz"), "{}", String::from_utf8_lossy(&bad.stderr));
}

/// A negative number reaches the command's own validation (not taken for a flag).
#[test]
fn negative_numbers_reach_the_validation() {
    for args in [
        &["simulate", "assets/scenarios/msl/First.ron", "--dt", "-1"][..],
        &["run", "assets/vehicles/nissan_350z.ron", "--cycle", "udds", "--dt", "-0.001"][..],
    ] {
        let out = driveline(args);
        let msg = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {msg}");
        assert!(msg.contains("dt") && !msg.contains("unexpected argument"), "{args:?}: {msg}");
    }
}

/// An output past the documented size is refused before anything is written (no file), with
/// the limit and `--force` named; `--force` lifts it (checked on a run cut short by a bad step).
#[test]
fn outputs_past_the_size_limit_are_refused_unless_forced() {
    let dir = std::env::temp_dir().join(format!("driveline_size_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("huge.csv");
    let csv_s = csv.to_str().unwrap();
    // CoupledClutches to 1.5 s at 1 ns: 1.5e9 rows.
    let out = driveline(&["simulate", "assets/scenarios/msl/CoupledClutches.ron", "--dt", "1e-9", "--out", csv_s]);
    let msg = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{msg}");
    assert!(msg.contains("rows") && msg.contains("--force") && msg.contains("5000000"), "{msg}");
    assert!(!csv.exists(), "a refused run created its output");
    // --t-end 1e12 at the default step: refused the same way.
    let out = driveline(&["simulate", "assets/scenarios/msl/First.ron", "--t-end", "1e12"]);
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(msg.contains("--force") && out.stdout.is_empty(), "{msg}");
    // `run` with a telemetry rate that writes every step of a 0.1 ms UDDS run (13.7 M rows).
    let out = driveline(&[
        "run",
        "assets/vehicles/nissan_350z.ron",
        "--cycle",
        "udds",
        "--dt",
        "1e-4",
        "--rate",
        "1e6",
        "--out",
        csv_s,
    ]);
    let msg = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{msg}");
    assert!(msg.contains("telemetry CSV") && msg.contains("--force"), "{msg}");
    assert!(!csv.exists(), "a refused run created its output");
    // Forced, the size guard lets it through: the run starts (and writes its header).
    let out = driveline(&[
        "simulate",
        "assets/scenarios/msl/First.ron",
        "--t-end",
        "1e12",
        "--dt",
        "1e-3",
        "--force",
        "--out",
        "/dev/full",
    ]);
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(!msg.contains("--force"), "{msg}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `soak` (a short one: a vehicle of each kind for two simulated minutes at 60 Hz): passes, and
/// its JSON holds the figures the soak is judged by.
#[test]
fn soak_passes_a_short_run_and_writes_its_figures() {
    let dir = std::env::temp_dir().join(format!("driveline_soak_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("soak.json");
    let out = driveline(&["soak", "--per-kind", "1", "--seconds", "120", "--json", json.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["passed"], true);
    assert_eq!(v["vehicles"], 4, "one of each shipped kind");
    assert_eq!(v["vehicle_steps"], 4 * 7200);
    assert_eq!(v["rss_bytes"].as_array().unwrap().len(), 2, "one sample a minute");
    for k in v["kinds"].as_array().unwrap() {
        assert_eq!(k["step_errors"], 0);
        assert!(k["max_ledger_residual"].as_f64().unwrap() <= 1e-9, "{k}");
        // (Two minutes of the mixed cycle, from its start or a quarter in: some driving.)
        assert!(k["distance_km"].as_f64().unwrap() > 0.0, "{k}");
    }
    // Refused: a step past 50 ms, no vehicles.
    assert_eq!(driveline(&["soak", "--dt", "-1"]).status.code(), Some(2));
    assert_eq!(driveline(&["soak", "--vehicles", "tests"]).status.code(), Some(2));
    std::fs::remove_dir_all(&dir).ok();
}

/// A reader that closes standard output early (`driveline bench ... | head -1`) ends the run
/// quietly: no panic, exit 0.
#[test]
fn a_closed_standard_output_ends_the_run_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_driveline"))
        .args(["bench", "--vehicle", "assets/vehicles/sedan_8hp.ron", "--vehicles", "2", "--seconds", "0.05"])
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run driveline");
    // Closed before the bench (which builds two vehicles first) prints its first line.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait for driveline");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
}
