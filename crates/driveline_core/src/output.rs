//! Tabular output of a simulation: the CSV contract of `driveline simulate`.
//!
//! Columns: `time`, then for every Inertia `NAME.phi,NAME.w` (Mass: `NAME.s,NAME.v`), for every element with a
//! relative coordinate (two-flange elements, gears, brakes, bearing friction) `NAME.phi_rel,
//! NAME.w_rel,NAME.tau`, and for friction elements also `NAME.mode` (MSL codes -1, 0, 1, 2). A sensor gives
//! its MSL outputs instead: `NAME.phi` (AngleSensor), `NAME.w` (SpeedSensor), `NAME.phi_rel` (RelAngleSensor),
//! `NAME.w_rel` (RelSpeedSensor), `NAME.tau` (TorqueSensor), `NAME.power` (PowerSensor), and `NAME.tau,NAME.w,
//! NAME.power` (MultiSensor), `NAME.a` (AccSensor) and `NAME.a_rel` (RelAccSensor). The thermal network adds `NAME.T` (K) for every `HeatCapacitor`, `NAME.Q_flow` (W)
//! for every `ThermalConductor` and `Convection`, and `NAME.lossPower` (W) for every element whose `heatPort` is
//! connected.

use crate::Simulation;
use std::io::{self, Write};

/// What one column reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    Phi(usize),
    W(usize),
    PhiRel(usize),
    WRel(usize),
    Tau(usize),
    Mode(usize),
    /// Torque times the speed of the element's `rel` row (a power sensor's flange).
    Power(usize),
    /// An acceleration sensor's reading.
    Acc(usize),
    /// Temperature of the element's heat port, K.
    Temperature(usize),
    /// Heat flow through a conductor or convection, W.
    HeatFlow(usize),
    /// Power dissipated into the heat port, W.
    LossPower(usize),
}

/// Writes simulation rows as CSV with a fixed column layout.
#[derive(Debug, Clone)]
pub struct CsvRecorder {
    cols: Vec<Col>,
    names: Vec<String>,
}

impl CsvRecorder {
    /// The column layout for a simulation's network.
    pub fn new(sim: &Simulation) -> Self {
        let mut cols = Vec::new();
        let mut names = Vec::new();
        for (e, info) in sim.network().elements.iter().enumerate() {
            if let Some(sensor) = info.sensor {
                use crate::network::Sensor;
                let outputs: &[(Col, &str)] = match sensor {
                    Sensor::Angle => &[(Col::PhiRel(e), "phi")],
                    Sensor::Speed => &[(Col::WRel(e), "w")],
                    Sensor::RelAngle => &[(Col::PhiRel(e), "phi_rel")],
                    Sensor::RelSpeed => &[(Col::WRel(e), "w_rel")],
                    Sensor::Torque => &[(Col::Tau(e), "tau")],
                    Sensor::Power => &[(Col::Power(e), "power")],
                    Sensor::Multi => &[(Col::Tau(e), "tau"), (Col::WRel(e), "w"), (Col::Power(e), "power")],
                    Sensor::Acc => &[(Col::Acc(e), "a")],
                    Sensor::RelAcc => &[(Col::Acc(e), "a_rel")],
                };
                for &(c, q) in outputs {
                    cols.push(c);
                    names.push(format!("{}.{q}", info.name));
                }
                continue;
            }
            if let Some(node) = info.body {
                // Translational bodies (Mass) read as position s and velocity v.
                let (p, v) = match sim.network().nodes[node].domain {
                    crate::Domain::Rotational => ("phi", "w"),
                    crate::Domain::Translational => ("s", "v"),
                };
                cols.extend([Col::Phi(e), Col::W(e)]);
                names.extend([format!("{}.{p}", info.name), format!("{}.{v}", info.name)]);
            }
            if info.rel.is_some() {
                cols.extend([Col::PhiRel(e), Col::WRel(e), Col::Tau(e)]);
                names.extend([
                    format!("{}.phi_rel", info.name),
                    format!("{}.w_rel", info.name),
                    format!("{}.tau", info.name),
                ]);
            }
            if info.has_mode {
                cols.push(Col::Mode(e));
                names.push(format!("{}.mode", info.name));
            }
            if sim.element_temperature(e).is_some() {
                let (c, q) = match info.kind {
                    "HeatCapacitor" => (Col::Temperature(e), "T"),
                    "ThermalConductor" | "Convection" => (Col::HeatFlow(e), "Q_flow"),
                    "FixedTemperature" | "FixedHeatFlow" => continue,
                    _ => (Col::LossPower(e), "lossPower"),
                };
                cols.push(c);
                names.push(format!("{}.{q}", info.name));
            }
        }
        Self { cols, names }
    }

    /// Column names after `time`.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Writes the header line.
    pub fn header(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(b"time")?;
        for n in &self.names {
            out.write_all(b",")?;
            out.write_all(n.as_bytes())?;
        }
        out.write_all(b"\n")
    }

    /// The values of one row (without time) into `buf`, which is cleared first.
    pub fn values(&self, sim: &Simulation, buf: &mut Vec<f64>) {
        buf.clear();
        buf.extend(self.cols.iter().map(|&c| value(sim, c)));
    }

    /// Writes one row at the simulation's current time (modes as integers).
    pub fn row(&self, sim: &Simulation, out: &mut impl Write) -> io::Result<()> {
        let mut fmt = zmij::Buffer::new();
        out.write_all(fmt.format(sim.time()).as_bytes())?;
        for &c in &self.cols {
            out.write_all(b",")?;
            match c {
                Col::Mode(e) => write!(out, "{}", sim.element_mode(e).map_or(0, |m| m.code()))?,
                _ => out.write_all(fmt.format(value(sim, c)).as_bytes())?,
            }
        }
        out.write_all(b"\n")
    }
}

/// The value a column reads (NaN where the element lacks the quantity).
fn value(sim: &Simulation, c: Col) -> f64 {
    match c {
        Col::Phi(e) => sim.body_state(e).map_or(f64::NAN, |s| s.0),
        Col::W(e) => sim.body_state(e).map_or(f64::NAN, |s| s.1),
        Col::PhiRel(e) => sim.element_relative(e).map_or(f64::NAN, |s| s.0),
        Col::WRel(e) => sim.element_relative_speed(e).unwrap_or(f64::NAN),
        Col::Tau(e) => sim.element_torque(e),
        Col::Mode(e) => sim.element_mode(e).map_or(f64::NAN, |m| m.code() as f64),
        Col::Power(e) => sim.element_torque(e) * sim.element_relative_speed(e).unwrap_or(f64::NAN),
        Col::Acc(e) => sim.element_acceleration(e).unwrap_or(f64::NAN),
        Col::Temperature(e) => sim.element_temperature(e).unwrap_or(f64::NAN),
        Col::HeatFlow(e) => sim.element_heat_flow(e).unwrap_or(f64::NAN),
        Col::LossPower(e) => sim.element_dissipation(e),
    }
}
