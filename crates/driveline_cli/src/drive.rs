//! `driveline drive`: one vehicle stepped in real time, paced to the wall clock, from live or
//! recorded driver input, streaming telemetry; the loop's health measured.
//!
//! # The loop
//! Step `k` is due at `start + k / hz`. The loop sleeps until shortly before a deadline and
//! spins the rest of the way, so it neither drifts nor burns a core between steps. A step that
//! starts late is taken at once, and so are the ones after it, until the loop has caught up; if
//! it falls more than [`CATCH_UP`] periods behind, the deadlines it cannot meet are dropped
//! (counted as missed) and the schedule moves on. Simulated time advances by exactly one period
//! per step whatever happens to the wall clock, so a run is the same bit for bit paced or not.
//!
//! # Input
//! - `--input-csv FILE`: rows `time,throttle,brake,clutch,parking_brake,gear,shift_up,
//!   shift_down,selector,ignition,starter,grade` (more columns are ignored). A step takes the
//!   last row at or before its start time. `--record` writes this format for every step.
//! - `--input-udp ADDR`: datagrams of [`INPUT_PACKET_LEN`] bytes (layout below), the newest
//!   taken at each step. A datagram of another size, another magic or version, or with a
//!   non-finite or out-of-range field is dropped and counted, never applied.
//! - Without either, a gamepad or wheel through `driveline_gamepad` (`--bindings FILE`), when
//!   the CLI is built with the `gamepad` feature.
//!
//! With live input, no input for `--input-timeout` seconds (and a disconnected gamepad) lifts
//! the throttle and applies the brake and the clutch, as the example car does.
//!
//! # Input packet (version 1, 32 bytes, little-endian)
//! | offset | type | field |
//! |---|---|---|
//! | 0 | `[u8; 4]` | magic `DRVI` |
//! | 4 | u16 | version (1) |
//! | 6 | u16 | packet length in bytes (32) |
//! | 8 | u32 | sequence number (the newest wins; older ones are dropped) |
//! | 12 | f32 | accelerator pedal, [0, 1] |
//! | 16 | f32 | brake pedal, [0, 1] |
//! | 20 | f32 | clutch pedal, [0, 1] (1 floored) |
//! | 24 | f32 | steering, [-1, 1] (carried for the rig; the 1-D road ignores it) |
//! | 28 | i8 | gear lever (-1 R, 0 N, 1..) |
//! | 29 | u8 | selector: 0 P, 1 R, 2 N, 3 D, 4 M |
//! | 30 | u16 | buttons: bit 0 shift up, 1 shift down, 2 ignition, 3 starter, 4 handbrake |
//!
//! # Health
//! Per step: the compute time (input, step, telemetry) and the lateness (how long after its
//! deadline the step began); missed deadlines; UDP packets in (applied, dropped) and out; the
//! age of the input applied (time since its packet arrived).

use driveline_core::automatic::Selector;
use driveline_core::vehicle::udp::UdpTelemetry;
use driveline_core::{DriverInput, Vehicle};
use std::io::{IsTerminal, Write};
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Bytes in a version 1 input packet.
pub const INPUT_PACKET_LEN: usize = 32;
/// How many periods behind the loop may fall and still catch up; beyond, deadlines are dropped.
pub const CATCH_UP: u64 = 10;
/// How long before a deadline the loop stops sleeping and spins, s.
const SPIN: f64 = 300e-6;

/// What `driveline drive` was asked to do (its command-line options).
#[derive(clap::Args)]
pub struct DriveOptions {
    /// Vehicle file (RON).
    pub vehicle: PathBuf,
    /// Steps per second of wall time (and 1 / the step, s).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1000.0)]
    pub hz: f64,
    /// Recorded input: `time,throttle,brake,clutch,parking_brake,gear,shift_up,shift_down,
    /// selector,ignition,starter,grade` (what --record writes).
    #[arg(long)]
    pub input_csv: Option<PathBuf>,
    /// Live input: input packets received on this address.
    #[arg(long)]
    pub input_udp: Option<SocketAddr>,
    /// Gamepad bindings file (a build with the `gamepad` feature; default: Xbox layout).
    #[arg(long)]
    pub bindings: Option<PathBuf>,
    /// Stream telemetry over UDP to this address (packet layout in
    /// `driveline_core::vehicle::udp`).
    #[arg(long)]
    pub udp: Option<SocketAddr>,
    /// UDP packets per second.
    #[arg(long, allow_negative_numbers = true, default_value_t = 60.0)]
    pub udp_rate: f64,
    /// Record every step's input (and a few outputs) here; --input-csv replays it bit for bit.
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Stop after this many seconds (default: the end of --input-csv, or Ctrl-C).
    #[arg(long, allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// Live input older than this, s, lifts the throttle and applies brake and clutch.
    #[arg(long, allow_negative_numbers = true, default_value_t = 0.5)]
    pub input_timeout: f64,
    /// Step as fast as possible instead of paced (the same result, bit for bit).
    #[arg(long)]
    pub no_pacing: bool,
}

/// Durations in 1 µs buckets up to 100 ms, and the largest.
struct Histogram {
    buckets: Vec<u64>,
    max: f64,
    count: u64,
}

impl Histogram {
    fn new() -> Self {
        Self { buckets: vec![0; 100_000], max: 0.0, count: 0 }
    }
    fn add(&mut self, seconds: f64) {
        let us = (seconds.max(0.0) * 1e6) as usize;
        let last = self.buckets.len() - 1;
        self.buckets[us.min(last)] += 1;
        self.max = self.max.max(seconds);
        self.count += 1;
    }
    /// The `q` quantile, s (the upper edge of its bucket).
    fn quantile(&self, q: f64) -> f64 {
        let target = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (us, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= target {
                return (us + 1) as f64 * 1e-6;
            }
        }
        self.max
    }
    fn json(&self) -> serde_json::Value {
        // Whole microseconds (the buckets' resolution); the largest to the nanosecond.
        let us = |s: f64| (s * 1e6).round();
        serde_json::json!({
            "p50_us": us(self.quantile(0.5)),
            "p99_us": us(self.quantile(0.99)),
            "max_us": (self.max * 1e9).round() / 1e3,
        })
    }
}

/// Recorded or scripted input: rows by start time.
struct CsvInput {
    rows: Vec<(f64, DriverInput)>,
    next: usize,
}

impl CsvInput {
    fn load(path: &PathBuf) -> Result<Self, String> {
        let file = path.display().to_string();
        let mut reader = csv::Reader::from_path(path).map_err(|e| format!("{file}: {e}"))?;
        let headers = reader.headers().map_err(|e| format!("{file}: {e}"))?.clone();
        let col = |name: &str| headers.iter().position(|h| h == name);
        let time = col("time").ok_or_else(|| format!("{file}:1: no `time` column"))?;
        let mut rows = Vec::new();
        for (k, record) in reader.records().enumerate() {
            let line = k + 2;
            let record = record.map_err(|e| format!("{file}:{line}: {e}"))?;
            let num = |name: &str, default: f64| -> Result<f64, String> {
                match col(name).and_then(|c| record.get(c)) {
                    None | Some("") => Ok(default),
                    Some(s) => s.parse::<f64>().map_err(|_| format!("{file}:{line}: `{name}` is `{s}`, not a number")),
                }
            };
            let flag = |name: &str| -> Result<bool, String> { Ok(num(name, 0.0)? != 0.0) };
            let t = record.get(time).unwrap_or("").parse::<f64>().map_err(|_| format!("{file}:{line}: bad `time`"))?;
            if !t.is_finite() || rows.last().is_some_and(|r: &(f64, DriverInput)| t < r.0) {
                return Err(format!("{file}:{line}: `time` {t} must be finite and not decrease"));
            }
            let selector = match col("selector").and_then(|c| record.get(c)).unwrap_or("D") {
                "P" => Selector::Park,
                "R" => Selector::Reverse,
                "N" => Selector::Neutral,
                "D" | "" => Selector::Drive,
                "M" => Selector::Manual,
                s => return Err(format!("{file}:{line}: selector `{s}`; allowed: P, R, N, D, M")),
            };
            let input = DriverInput {
                throttle: num("throttle", 0.0)?,
                brake: num("brake", 0.0)?,
                clutch: num("clutch", 0.0)?,
                parking_brake: num("parking_brake", 0.0)?,
                gear: num("gear", 0.0)? as i32,
                shift_up: flag("shift_up")?,
                shift_down: flag("shift_down")?,
                selector,
                ignition: num("ignition", 1.0)? != 0.0,
                starter: flag("starter")?,
                grade: num("grade", 0.0)?,
            };
            rows.push((t, input));
        }
        if rows.is_empty() {
            return Err(format!("{file}: no input rows"));
        }
        Ok(Self { rows, next: 0 })
    }

    /// The input of the step starting at `t`: the last row at or before it.
    fn at(&mut self, t: f64) -> DriverInput {
        while self.next + 1 < self.rows.len() && self.rows[self.next + 1].0 <= t {
            self.next += 1;
        }
        self.rows[self.next].1
    }

    fn end(&self) -> f64 {
        self.rows.last().map_or(0.0, |r| r.0)
    }
}

/// Parses a version 1 input packet; `None` for anything malformed.
pub fn parse_input_packet(b: &[u8]) -> Option<(u32, DriverInput)> {
    if b.len() != INPUT_PACKET_LEN || &b[0..4] != b"DRVI" {
        return None;
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let f32_at = |o: usize| f32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]) as f64;
    if u16_at(4) != 1 || u16_at(6) as usize != INPUT_PACKET_LEN {
        return None;
    }
    let seq = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
    let (throttle, brake, clutch, steering) = (f32_at(12), f32_at(16), f32_at(20), f32_at(24));
    let unit = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
    if !(unit(throttle) && unit(brake) && unit(clutch) && steering.is_finite() && steering.abs() <= 1.0) {
        return None;
    }
    let selector = match b[29] {
        0 => Selector::Park,
        1 => Selector::Reverse,
        2 => Selector::Neutral,
        3 => Selector::Drive,
        4 => Selector::Manual,
        _ => return None,
    };
    let buttons = u16_at(30);
    let input = DriverInput {
        throttle,
        brake,
        clutch,
        parking_brake: if buttons & 16 != 0 { 1.0 } else { 0.0 },
        gear: b[28] as i8 as i32,
        shift_up: buttons & 1 != 0,
        shift_down: buttons & 2 != 0,
        selector,
        ignition: buttons & 4 != 0,
        starter: buttons & 8 != 0,
        grade: 0.0,
    };
    Some((seq, input))
}

/// Builds a version 1 input packet.
#[cfg(test)]
fn input_packet(seq: u32, input: &DriverInput, steering: f32) -> [u8; INPUT_PACKET_LEN] {
    let mut b = [0u8; INPUT_PACKET_LEN];
    b[0..4].copy_from_slice(b"DRVI");
    b[4..6].copy_from_slice(&1u16.to_le_bytes());
    b[6..8].copy_from_slice(&(INPUT_PACKET_LEN as u16).to_le_bytes());
    b[8..12].copy_from_slice(&seq.to_le_bytes());
    for (o, x) in [(12, input.throttle as f32), (16, input.brake as f32), (20, input.clutch as f32), (24, steering)] {
        b[o..o + 4].copy_from_slice(&x.to_le_bytes());
    }
    b[28] = input.gear as i8 as u8;
    b[29] = match input.selector {
        Selector::Park => 0,
        Selector::Reverse => 1,
        Selector::Neutral => 2,
        Selector::Drive => 3,
        Selector::Manual => 4,
    };
    let buttons = u16::from(input.shift_up)
        | u16::from(input.shift_down) << 1
        | u16::from(input.ignition) << 2
        | u16::from(input.starter) << 3
        | u16::from(input.parking_brake > 0.5) << 4;
    b[30..32].copy_from_slice(&buttons.to_le_bytes());
    b
}

/// Live input from UDP: the newest valid packet.
struct UdpInput {
    socket: UdpSocket,
    last: Option<(u32, DriverInput, Instant)>,
    applied: u64,
    dropped: u64,
}

impl UdpInput {
    fn poll(&mut self) {
        let mut buf = [0u8; 2048];
        while let Ok(n) = self.socket.recv(&mut buf) {
            match parse_input_packet(&buf[..n]) {
                Some((seq, input)) if self.last.is_none_or(|l| seq.wrapping_sub(l.0) as i32 > 0) => {
                    self.last = Some((seq, input, Instant::now()));
                    self.applied += 1;
                }
                _ => self.dropped += 1,
            }
        }
    }
}

/// Where the input comes from.
enum Source {
    Csv(CsvInput),
    Udp(UdpInput),
    #[cfg(feature = "gamepad")]
    Pad(Box<(driveline_gamepad::Gamepads, driveline_gamepad::ActionState)>),
}

/// No input: the throttle lifted, brake and clutch applied.
fn safe(mut input: DriverInput) -> DriverInput {
    input.throttle = 0.0;
    input.brake = 1.0;
    input.clutch = 1.0;
    input
}

fn source(o: &DriveOptions) -> Result<Source, String> {
    if let Some(path) = &o.input_csv {
        return CsvInput::load(path).map(Source::Csv);
    }
    if let Some(addr) = o.input_udp {
        let socket = UdpSocket::bind(addr).map_err(|e| format!("--input-udp {addr}: {e}"))?;
        socket.set_nonblocking(true).map_err(|e| e.to_string())?;
        return Ok(Source::Udp(UdpInput { socket, last: None, applied: 0, dropped: 0 }));
    }
    gamepad_source(o)
}

#[cfg(feature = "gamepad")]
fn gamepad_source(o: &DriveOptions) -> Result<Source, String> {
    let bindings = match &o.bindings {
        Some(p) => driveline_gamepad::Bindings::load(p)?,
        None => driveline_gamepad::Bindings::xbox(),
    };
    let pads = driveline_gamepad::Gamepads::new();
    eprintln!("{}", pads.status());
    Ok(Source::Pad(Box::new((pads, driveline_gamepad::ActionState::new(bindings)))))
}

#[cfg(not(feature = "gamepad"))]
fn gamepad_source(o: &DriveOptions) -> Result<Source, String> {
    let _ = &o.bindings;
    Err("no input: give --input-csv FILE or --input-udp ADDR (this build has no gamepad support; \
         build with `--features gamepad`)"
        .into())
}

/// Runs the loop; returns the summary.
pub fn drive(o: DriveOptions) -> Result<serde_json::Value, String> {
    if !(o.hz.is_finite() && (1.0..=100_000.0).contains(&o.hz)) {
        return Err(format!("--hz {} is out of range; allowed: 1 to 100000", o.hz));
    }
    if !(o.input_timeout.is_finite() && o.input_timeout > 0.0) {
        return Err(format!("--input-timeout {} must be > 0 s", o.input_timeout));
    }
    let mut car = Vehicle::load(&o.vehicle).map_err(|e| e.to_string())?;
    let mut src = source(&o)?;
    let duration = match (&src, o.duration) {
        (_, Some(d)) if d.is_finite() && d > 0.0 => d,
        (_, Some(d)) => return Err(format!("--duration {d} must be > 0 s")),
        (Source::Csv(c), None) => c.end(),
        _ => f64::INFINITY,
    };
    let mut udp_out = 0u64;
    let mut udp = match o.udp {
        Some(a) => Some(UdpTelemetry::new(a, o.udp_rate).map_err(|e| format!("--udp {a}: {e}"))?),
        None => None,
    };
    let mut record = match &o.record {
        Some(p) => {
            let f = std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let mut w = std::io::BufWriter::new(f);
            writeln!(w, "time,throttle,brake,clutch,parking_brake,gear,shift_up,shift_down,selector,ignition,starter,grade,engine_rpm,speed_kmh,engaged_gear")
                .map_err(|e| e.to_string())?;
            Some(w)
        }
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        // A second handler cannot be set in one process (tests call this in a loop): ignore.
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst));
    }
    let dt = 1.0 / o.hz;
    let period = Duration::from_secs_f64(dt);
    let steps_max = if duration.is_finite() { (duration / dt).round() as u64 } else { u64::MAX };
    let (mut compute, mut late, mut age) = (Histogram::new(), Histogram::new(), Histogram::new());
    let mut missed = 0u64;
    let mut last_input = DriverInput { ignition: true, ..DriverInput::default() };
    let status = std::io::stderr().is_terminal();
    let mut last_status = Instant::now();
    let start = Instant::now();
    let mut base = start; // deadline of step `base_k`
    let mut base_k = 0u64;
    let mut k = 0u64;
    let mut cpu = driveline_core::process::cpu_seconds();
    while k < steps_max && !stop.load(Ordering::SeqCst) {
        let due = base + period.mul_f64((k - base_k) as f64);
        if !o.no_pacing {
            let now = Instant::now();
            if due > now {
                let wait = due - now;
                if wait.as_secs_f64() > SPIN {
                    std::thread::sleep(wait - Duration::from_secs_f64(SPIN));
                }
                while Instant::now() < due {
                    std::hint::spin_loop();
                }
            }
            let behind = Instant::now().saturating_duration_since(due);
            let periods = (behind.as_secs_f64() / dt) as u64;
            if periods > CATCH_UP {
                // Too far behind to catch up: drop the deadlines that have passed.
                missed += periods;
                base = due + period.mul_f64(periods as f64);
                base_k = k;
            }
            late.add(
                Instant::now().saturating_duration_since(base + period.mul_f64((k - base_k) as f64)).as_secs_f64(),
            );
        }
        let t0 = Instant::now();
        let t = car.telemetry().time;
        let input = match &mut src {
            Source::Csv(c) => c.at(t),
            Source::Udp(u) => {
                u.poll();
                match u.last {
                    Some((_, i, at)) if at.elapsed().as_secs_f64() <= o.input_timeout => {
                        age.add(at.elapsed().as_secs_f64());
                        i
                    }
                    _ => safe(last_input),
                }
            }
            #[cfg(feature = "gamepad")]
            Source::Pad(pad) => {
                let (pads, state) = &mut **pad;
                pads.poll(state, |_| {});
                state.driver_input()
            }
        };
        last_input = input;
        car.step(&input, dt).map_err(|e| format!("t {t:.3} s: {e}"))?;
        if let Some(u) = udp.as_mut()
            && u.update(car.telemetry(), &input)
        {
            udp_out += 1;
        }
        if let Some(w) = record.as_mut() {
            let tm = car.telemetry();
            let sel = match input.selector {
                Selector::Park => "P",
                Selector::Reverse => "R",
                Selector::Neutral => "N",
                Selector::Drive => "D",
                Selector::Manual => "M",
            };
            writeln!(
                w,
                "{t},{},{},{},{},{},{},{},{sel},{},{},{},{},{},{}",
                input.throttle,
                input.brake,
                input.clutch,
                input.parking_brake,
                input.gear,
                u8::from(input.shift_up),
                u8::from(input.shift_down),
                u8::from(input.ignition),
                u8::from(input.starter),
                input.grade,
                tm.engine_rpm,
                tm.speed * 3.6,
                tm.engaged_gear
            )
            .map_err(|e| e.to_string())?;
        }
        compute.add(t0.elapsed().as_secs_f64());
        k += 1;
        if status && last_status.elapsed() > Duration::from_millis(100) {
            last_status = Instant::now();
            let tm = car.telemetry();
            eprint!(
                "\r t {:7.2} s  {:5.0} rpm  gear {:>2}  {:5.1} km/h  clutch {:.2}  late p99 {:5.0} us  missed {missed}   ",
                tm.time,
                tm.engine_rpm,
                driveline_core::vehicle::gear_name(tm.engaged_gear),
                tm.speed * 3.6,
                input.clutch,
                late.quantile(0.99) * 1e6
            );
        }
    }
    if status {
        eprintln!();
    }
    if let Some(mut w) = record {
        w.flush().map_err(|e| e.to_string())?;
    }
    let wall = start.elapsed().as_secs_f64();
    cpu = driveline_core::process::cpu_seconds().zip(cpu).map(|(b, a)| b - a);
    let tm = car.telemetry();
    let (udp_in, udp_dropped) = match &src {
        Source::Udp(u) => (u.applied, u.dropped),
        _ => (0, 0),
    };
    Ok(serde_json::json!({
        "vehicle": car.spec().name,
        "hz": o.hz,
        "paced": !o.no_pacing,
        "steps": k,
        "simulated_s": tm.time,
        "wall_s": wall,
        "cpu_s": cpu,
        "cpu_share": cpu.map(|c| c / wall.max(1e-9)),
        "compute": compute.json(),
        "lateness": if o.no_pacing { serde_json::Value::Null } else { late.json() },
        "missed_deadlines": missed,
        "udp_in": udp_in,
        "udp_dropped": udp_dropped,
        "udp_out": udp_out,
        "input_age": if age.count > 0 { age.json() } else { serde_json::Value::Null },
        "final": {
            "time": tm.time,
            "speed": tm.speed,
            "engine_rpm": tm.engine_rpm,
            "engaged_gear": tm.engaged_gear,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_packet_round_trips_and_a_malformed_one_is_refused() {
        let input = DriverInput {
            throttle: 0.25,
            brake: 0.5,
            clutch: 1.0,
            gear: -1,
            shift_up: true,
            ignition: true,
            selector: Selector::Manual,
            ..DriverInput::default()
        };
        let p = input_packet(7, &input, -0.5);
        let (seq, back) = parse_input_packet(&p).expect("valid");
        assert_eq!((seq, back), (7, input));
        // Wrong size, magic, version, a non-finite or out-of-range pedal, an unknown selector.
        assert!(parse_input_packet(&p[..31]).is_none());
        let mut bad = p;
        bad[0] = b'X';
        assert!(parse_input_packet(&bad).is_none());
        let mut bad = p;
        bad[4] = 2;
        assert!(parse_input_packet(&bad).is_none());
        for (o, x) in [(12, f32::NAN), (16, 1.5), (20, -0.1), (24, f32::INFINITY)] {
            let mut bad = p;
            bad[o..o + 4].copy_from_slice(&x.to_le_bytes());
            assert!(parse_input_packet(&bad).is_none(), "{o} {x}");
        }
        let mut bad = p;
        bad[29] = 9;
        assert!(parse_input_packet(&bad).is_none());
    }

    #[test]
    fn quantiles_come_from_the_histogram() {
        let mut h = Histogram::new();
        for us in 1..=100 {
            h.add(us as f64 * 1e-6 - 0.5e-6);
        }
        // (Bucket upper edges: the k-th of 100 values sits in bucket k - 1.)
        // (Products of whole microseconds and 1e-6: equal to a rounding.)
        assert!((h.quantile(0.5) - 50e-6).abs() < 1e-15, "{}", h.quantile(0.5));
        assert!((h.quantile(0.99) - 99e-6).abs() < 1e-15, "{}", h.quantile(0.99));
        assert!((h.max - 99.5e-6).abs() < 1e-12);
    }
}
