//! `driveline run`: a vehicle follows a drive cycle with the driver model; telemetry CSV, plots
//! and a summary JSON.

use driveline_core::Vehicle;
use driveline_core::vehicle::driver::{Cycle, CycleSummary, Driver, DriverParams, drive_cycle};
use driveline_core::vehicle::udp::UdpTelemetry;
use driveline_core::vehicle::{DriverInput, Telemetry};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

/// The shipped cycles, compiled in (sources in `assets/cycles/README.md`).
pub const BUILTIN: [(&str, &str); 10] = [
    ("udds", include_str!("../../../assets/cycles/udds.csv")),
    ("hwfet", include_str!("../../../assets/cycles/hwfet.csv")),
    ("us06", include_str!("../../../assets/cycles/us06.csv")),
    ("nedc", include_str!("../../../assets/cycles/nedc.csv")),
    ("wltc3b", include_str!("../../../assets/cycles/wltc3b.csv")),
    ("ftp75", include_str!("../../../assets/cycles/ftp75.csv")),
    ("artemis_urban", include_str!("../../../assets/cycles/artemis_urban.csv")),
    ("artemis_rural", include_str!("../../../assets/cycles/artemis_rural.csv")),
    ("artemis_motorway130", include_str!("../../../assets/cycles/artemis_motorway130.csv")),
    ("artemis_motorway150", include_str!("../../../assets/cycles/artemis_motorway150.csv")),
];

/// A built-in cycle by name, or a `time_s,speed_mps` CSV file.
pub fn load_cycle(name: &str) -> Result<Cycle, String> {
    if let Some((n, text)) = BUILTIN.iter().find(|(n, _)| *n == name) {
        return Cycle::parse(text, n);
    }
    let path = Path::new(name);
    let text = std::fs::read_to_string(path).map_err(|e| {
        let names: Vec<&str> = BUILTIN.iter().map(|b| b.0).collect();
        format!("--cycle {name}: not a built-in cycle ({}) and not a readable file: {e}", names.join(", "))
    })?;
    Cycle::parse(&text, &path.display().to_string())
}

/// Options of `driveline run`.
pub struct RunOptions {
    pub vehicle: PathBuf,
    pub cycle: String,
    pub dt: f64,
    pub out: Option<PathBuf>,
    pub rate: f64,
    pub plot: Option<PathBuf>,
    pub summary_json: Option<PathBuf>,
    pub udp: Option<std::net::SocketAddr>,
    pub udp_rate: f64,
    /// Write the CSV even past the size limit ([`crate::check_output_size`]).
    pub force: bool,
}

/// One plotted sample.
struct Sample {
    t: f64,
    target: f64,
    speed: f64,
    engine: f64,
    gear: f64,
    clutch: f64,
}

const HEADER: &str = "time,target_kmh,speed_kmh,acceleration,distance,throttle_pedal,brake_pedal,clutch_pedal,\
engine_rpm,engine_torque,throttle,torque_reduction,selected_gear,engaged_gear,clutch_slip,clutch_torque,\
clutch_engagement,clutch_temperature,turbine_rpm,converter_torque,lockup_engagement,lockup_locked,shift_phase,\
wheel_speed_fl,wheel_speed_fr,wheel_speed_rl,wheel_speed_rr,tyre_force_fl,tyre_force_fr,tyre_force_rl,tyre_force_rr,\
tyre_slip_fl,tyre_slip_fr,tyre_slip_rl,tyre_slip_rr,brake_torque_fl,brake_torque_fr,brake_torque_rl,brake_torque_rr,\
drive_torque_fl,drive_torque_fr,drive_torque_rl,drive_torque_rr,fuel_used";

fn row(w: &mut impl Write, t: &Telemetry, target: f64, i: &DriverInput) -> std::io::Result<()> {
    write!(
        w,
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:?}",
        t.time,
        target * 3.6,
        t.speed * 3.6,
        t.acceleration,
        t.distance,
        i.throttle,
        i.brake,
        i.clutch,
        t.engine_rpm,
        t.engine_torque,
        t.throttle,
        t.torque_reduction,
        t.selected_gear,
        t.engaged_gear,
        t.clutch_slip,
        t.clutch_torque,
        t.clutch_engagement,
        t.clutch_temperature,
        t.turbine_rpm,
        t.converter_torque,
        t.lockup_engagement,
        u8::from(t.lockup_locked),
        t.shift_phase
    )?;
    for a in [&t.wheel_speed, &t.tyre_force, &t.tyre_slip, &t.brake_torque, &t.drive_torque] {
        for v in a {
            write!(w, ",{v}")?;
        }
    }
    writeln!(w, ",{}", t.fuel_used)
}

/// Runs the cycle; returns the summary.
pub fn run(o: RunOptions) -> Result<CycleSummary, String> {
    if !(o.dt.is_finite() && o.dt > 0.0 && o.dt <= 0.05) {
        return Err(format!("--dt {}: the step must be a finite number in (0, 0.05] s", o.dt));
    }
    if !(o.rate.is_finite() && o.rate > 0.0) {
        return Err(format!("--rate {}: rows per simulated second must be > 0", o.rate));
    }
    if let Some(p) = &o.plot {
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        if ext != "svg" && ext != "png" {
            return Err(format!("--plot {}: give a .svg or .png file", p.display()));
        }
    }
    let cycle = load_cycle(&o.cycle)?;
    let mut car = Vehicle::load(&o.vehicle).map_err(|e| e.to_string())?;
    let mut driver = Driver::new(car.spec(), DriverParams::default());
    let every = ((1.0 / o.rate) / o.dt).round().max(1.0) as u64;
    let steps = (cycle.duration() / o.dt).round() as u64;
    if o.out.is_some() {
        crate::check_output_size("the telemetry CSV", steps / every + 1, HEADER.split(',').count(), o.force)?;
    }
    let mut csv = match &o.out {
        Some(p) => {
            let f = std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
            writeln!(w, "{HEADER}").map_err(|e| e.to_string())?;
            Some(w)
        }
        None => None,
    };
    let plot_every = ((0.1 / o.dt).round().max(1.0)) as u64;
    let bar = std::io::stderr()
        .is_terminal()
        .then(|| crate::progress(steps, format!("{} on {}", car.spec().name, cycle.name)));
    let mut udp = match o.udp {
        Some(a) => Some(UdpTelemetry::new(a, o.udp_rate).map_err(|e| format!("--udp {a}: {e}"))?),
        None => None,
    };
    let mut samples: Vec<Sample> = Vec::with_capacity((steps / plot_every + 1) as usize);
    let mut k = 0u64;
    let mut io_error = None;
    let summary = drive_cycle(&mut car, &cycle, &mut driver, o.dt, |v, input| {
        k += 1;
        let t = v.telemetry();
        if let Some(u) = udp.as_mut() {
            u.update(t, input);
        }
        let target = cycle.speed_at(t.time);
        if let Some(w) = csv.as_mut()
            && k.is_multiple_of(every)
            && io_error.is_none()
            && let Err(e) = row(w, t, target, input)
        {
            io_error = Some(e.to_string());
        }
        if k.is_multiple_of(plot_every) {
            let clutch = if v.tcu().is_some() { t.lockup_engagement } else { 1.0 - input.clutch };
            samples.push(Sample {
                t: t.time,
                target: target * 3.6,
                speed: t.speed * 3.6,
                engine: t.engine_rpm,
                gear: t.engaged_gear as f64,
                clutch,
            });
        }
        if let Some(b) = &bar
            && k.is_multiple_of(10_000)
        {
            b.set_position(k);
        }
    })
    .map_err(|e| e.to_string())?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let Some(e) = io_error {
        return Err(format!("writing the telemetry: {e}"));
    }
    if let Some(mut w) = csv {
        w.flush().map_err(|e| e.to_string())?;
    }
    if let Some(p) = &o.plot {
        plot(p, &samples, &summary).map_err(|e| format!("--plot {}: {e}", p.display()))?;
    }
    if let Some(p) = &o.summary_json {
        let text = serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?;
        std::fs::write(p, text + "\n").map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(summary)
}

/// Four panels over time: speed against the trace, engine speed, gear, clutch (manual: pedal
/// engagement; automatic: lock-up).
fn plot(path: &Path, s: &[Sample], summary: &CycleSummary) -> Result<(), String> {
    let png = path.extension().is_some_and(|e| e == "png");
    register_font()?;
    let size = (1400, 1000);
    if png {
        let root = plotters::prelude::BitMapBackend::new(path, size);
        draw(root, s, summary)
    } else {
        let root = plotters::prelude::SVGBackend::new(path, size);
        draw(root, s, summary)
    }
}

/// Text in plots is laid out with a TrueType font; the system's DejaVu Sans is used (once).
fn register_font() -> Result<(), String> {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(load_font).clone()
}

fn load_font() -> Result<(), String> {
    const CANDIDATES: [&str; 3] = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    ];
    let bytes = CANDIDATES
        .iter()
        .find_map(|p| std::fs::read(p).ok())
        .ok_or("plots need the DejaVu Sans font (apt-get install fonts-dejavu-core)".to_string())?;
    // The font lives as long as the process: plotters keeps a 'static reference.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, bytes)
        .map_err(|_| "the DejaVu Sans font could not be read".to_string())
}

fn draw<DB: plotters::prelude::DrawingBackend>(
    backend: DB,
    s: &[Sample],
    summary: &CycleSummary,
) -> Result<(), String> {
    use plotters::prelude::*;
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    let root = backend.into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let title = format!(
        "{} on {}: rms speed error {:.2} km/h, {} shifts",
        summary.vehicle, summary.cycle, summary.rms_speed_error_kmh, summary.shifts
    );
    let root = root.titled(&title, ("sans-serif", 24)).map_err(e)?;
    let panels = root.split_evenly((4, 1));
    let t_end = s.last().map_or(1.0, |x| x.t);
    let series: [(&str, f64, Vec<(&str, RGBColor, Vec<(f64, f64)>)>); 4] = [
        (
            "speed, km/h",
            s.iter().map(|x| x.speed.max(x.target)).fold(1.0, f64::max) * 1.1,
            vec![
                ("trace", RGBColor(150, 150, 150), s.iter().map(|x| (x.t, x.target)).collect()),
                ("vehicle", RGBColor(200, 30, 30), s.iter().map(|x| (x.t, x.speed)).collect()),
            ],
        ),
        (
            "engine, rpm",
            s.iter().map(|x| x.engine).fold(1000.0, f64::max) * 1.1,
            vec![("engine", RGBColor(30, 80, 200), s.iter().map(|x| (x.t, x.engine)).collect())],
        ),
        (
            "gear",
            s.iter().map(|x| x.gear).fold(1.0, f64::max) + 1.0,
            vec![("engaged", RGBColor(20, 140, 60), s.iter().map(|x| (x.t, x.gear)).collect())],
        ),
        (
            "clutch / lock-up",
            1.05,
            vec![("engagement", RGBColor(160, 60, 160), s.iter().map(|x| (x.t, x.clutch)).collect())],
        ),
    ];
    for (area, (label, top, lines)) in panels.iter().zip(series) {
        let low = if label == "gear" { -1.0 } else { 0.0 };
        let mut chart = ChartBuilder::on(area)
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..t_end, low..top)
            .map_err(e)?;
        chart.configure_mesh().y_desc(label).x_desc("time, s").draw().map_err(e)?;
        for (name, color, points) in lines {
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(1)))
                .map_err(e)?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(e)?;
    }
    root.present().map_err(e)
}
