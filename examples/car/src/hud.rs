//! The HUD: tachometer, speed and gear; pedals; the clutch (slip, torque, temperature) or the
//! automatic's shift elements (locked, slipping, open; pressure and temperature) with the
//! converter lock-up; a scrolling plot of engine and wheel speed; the vehicle's messages (stall,
//! blocked shift, shift completed with its duration).

use crate::controls::PadState;
use crate::{Car, CarChoice, Phase};
use bevy::prelude::*;
use bevy_driveline::vehicle::{VehicleMessage, VehicleTelemetry};
use driveline_core::automatic::{LockupMode, Selector, ShiftPhase};
use driveline_core::vehicle::{Telemetry, VehicleEventKind};
use std::collections::VecDeque;

/// Builds the HUD when driving starts and refreshes it every frame.
pub struct HudPlugin;

impl Plugin for HudPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<Log>()
            .add_systems(OnEnter(Phase::Driving), spawn_hud)
            .add_systems(Update, (collect_messages, update_hud, update_plot).chain().run_if(in_state(Phase::Driving)));
    }
}

/// Plot samples kept (one per frame).
const PLOT_SAMPLES: usize = 150;
/// Plot size, px.
const PLOT_W: f32 = 420.0;
const PLOT_H: f32 = 150.0;
/// Plot scales: engine 0..8000 rpm, driven wheels 0..2000 rpm.
const ENGINE_FULL: f64 = 8000.0;
const WHEEL_FULL: f64 = 2000.0;
/// Rows of the drivetrain panel (8 shift elements and the converter).
const ROWS: usize = 9;

/// Which value a text shows.
#[derive(Component, Clone, Copy, PartialEq, Eq)]
enum Readout {
    Title,
    Speed,
    Gear,
    Rpm,
    Pedals,
    Status,
    Messages,
}

/// The tachometer's bar.
#[derive(Component)]
struct TachBar;

/// A pedal bar: 0 throttle, 1 brake, 2 clutch.
#[derive(Component)]
struct PedalBar(usize);

/// One row of the drivetrain panel: the row, its lamp and its text.
#[derive(Component)]
struct Row(usize);
#[derive(Component)]
struct RowLamp(usize);
#[derive(Component)]
struct RowText(usize);

/// A plot dot: trace (0 engine, 1 wheels) and sample index.
#[derive(Component)]
struct Dot(usize, usize);

/// Recent messages and the plot history.
#[derive(Resource, Default)]
struct Log {
    lines: VecDeque<String>,
    engine: VecDeque<f64>,
    wheels: VecDeque<f64>,
}

const PANEL: Color = Color::srgba(0.02, 0.03, 0.05, 0.72);
const LOCKED: Color = Color::srgb(0.15, 0.8, 0.3);
const SLIPPING: Color = Color::srgb(1.0, 0.6, 0.1);
const OPEN: Color = Color::srgb(0.3, 0.3, 0.33);

fn text(value: impl Into<String>, size: f32, color: Color) -> (Text, TextFont, TextColor) {
    (Text::new(value), TextFont::from_font_size(size), TextColor(color))
}

fn panel(left: Option<f32>, right: Option<f32>, top: Option<f32>, bottom: Option<f32>) -> (Node, BackgroundColor) {
    (
        Node {
            position_type: PositionType::Absolute,
            left: left.map_or(Val::Auto, px),
            right: right.map_or(Val::Auto, px),
            top: top.map_or(Val::Auto, px),
            bottom: bottom.map_or(Val::Auto, px),
            flex_direction: FlexDirection::Column,
            padding: UiRect::all(px(10)),
            row_gap: px(4),
            ..default()
        },
        BackgroundColor(PANEL),
    )
}

fn spawn_hud(mut commands: Commands) {
    // Top left: the car, the controls, the device status.
    commands.spawn(panel(Some(12.0), None, Some(12.0), None)).with_children(|p| {
        p.spawn((text("", 20.0, Color::WHITE), Readout::Title));
        p.spawn((text("", 14.0, Color::srgb(0.75, 0.78, 0.82)), Readout::Status));
    });
    // Bottom left: speed, gear, tachometer, pedals.
    commands.spawn(panel(Some(12.0), None, None, Some(12.0))).with_children(|p| {
        p.spawn(Node { column_gap: px(24), align_items: AlignItems::End, ..default() }).with_children(|r| {
            r.spawn((text("0", 64.0, Color::WHITE), Readout::Speed));
            r.spawn(text("km/h", 20.0, Color::srgb(0.7, 0.7, 0.7)));
            r.spawn((text("N", 64.0, Color::srgb(1.0, 0.85, 0.2)), Readout::Gear));
        });
        p.spawn((text("", 20.0, Color::WHITE), Readout::Rpm));
        p.spawn((Node { width: px(360), height: px(16), ..default() }, BackgroundColor(Color::srgb(0.15, 0.15, 0.17))))
            .with_child((
                TachBar,
                Node { width: percent(0), height: percent(100), ..default() },
                BackgroundColor(LOCKED),
            ));
        p.spawn(Node { column_gap: px(10), align_items: AlignItems::End, ..default() }).with_children(|r| {
            let colors = [Color::srgb(0.2, 0.85, 0.3), Color::srgb(0.9, 0.2, 0.15), Color::srgb(0.3, 0.6, 1.0)];
            for (i, c) in colors.into_iter().enumerate() {
                r.spawn((
                    Node { width: px(14), height: px(60), flex_direction: FlexDirection::ColumnReverse, ..default() },
                    BackgroundColor(Color::srgb(0.15, 0.15, 0.17)),
                ))
                .with_child((
                    PedalBar(i),
                    Node { width: percent(100), height: percent(0), ..default() },
                    BackgroundColor(c),
                ));
            }
            r.spawn((text("", 14.0, Color::srgb(0.8, 0.8, 0.8)), Readout::Pedals));
        });
    });
    // Right: the drivetrain (clutch, or shift elements and converter).
    commands.spawn(panel(None, Some(12.0), Some(222.0), None)).with_children(|p| {
        for i in 0..ROWS {
            p.spawn((Row(i), Node { column_gap: px(8), align_items: AlignItems::Center, ..default() })).with_children(
                |r| {
                    r.spawn((RowLamp(i), Node { width: px(14), height: px(14), ..default() }, BackgroundColor(OPEN)));
                    r.spawn((RowText(i), text("", 15.0, Color::WHITE)));
                },
            );
        }
    });
    // Top right: the plot.
    commands.spawn(panel(None, Some(12.0), Some(12.0), None)).with_children(|p| {
        p.spawn(text(
            "engine rpm (orange, 0-8000)  driven wheels rpm (cyan, 0-2000)",
            12.0,
            Color::srgb(0.8, 0.8, 0.8),
        ));
        p.spawn((
            Node { width: px(PLOT_W), height: px(PLOT_H), ..default() },
            BackgroundColor(Color::srgba(0.0, 0.0, 0.0, 0.4)),
        ))
        .with_children(|plot| {
            for trace in 0..2 {
                let c = if trace == 0 { Color::srgb(1.0, 0.55, 0.1) } else { Color::srgb(0.2, 0.85, 1.0) };
                for k in 0..PLOT_SAMPLES {
                    plot.spawn((
                        Dot(trace, k),
                        Node {
                            position_type: PositionType::Absolute,
                            width: px(3),
                            height: px(3),
                            left: px(k as f32 * PLOT_W / PLOT_SAMPLES as f32),
                            top: px(PLOT_H),
                            ..default()
                        },
                        BackgroundColor(c),
                        Visibility::Hidden,
                    ));
                }
            }
        });
    });
    // Bottom right: messages.
    commands.spawn(panel(None, Some(12.0), None, Some(12.0))).with_children(|p| {
        p.spawn((text("", 15.0, Color::srgb(0.95, 0.95, 0.8)), Readout::Messages));
    });
}

/// Turns the step's vehicle messages into log lines.
fn collect_messages(
    mut messages: MessageReader<VehicleMessage>,
    mut log: ResMut<Log>,
    mut pad: Option<ResMut<PadState>>,
) {
    for m in messages.read() {
        let t = m.event.time;
        let line = match m.event.kind {
            VehicleEventKind::Stalled => format!("{t:7.2} s  engine stalled"),
            VehicleEventKind::Started => format!("{t:7.2} s  engine started"),
            VehicleEventKind::ShiftBlocked { gear } => {
                format!("{t:7.2} s  shift to {} blocked (dogs butt)", gear_name(gear))
            }
            VehicleEventKind::ShiftRefused { gear } => format!("{t:7.2} s  shift to {} refused", gear_name(gear)),
            VehicleEventKind::ShiftAborted { gear } => format!("{t:7.2} s  shift to {} aborted", gear_name(gear)),
            VehicleEventKind::NoSuchGear { gear } => format!("{t:7.2} s  no gear {}", gear_name(gear)),
            VehicleEventKind::ShiftCompleted { gear, duration, report } => match report {
                Some(r) => format!(
                    "{t:7.2} s  shift {} -> {} in {:.0} ms (flare {:.0} rpm)",
                    r.from,
                    r.to,
                    duration * 1e3,
                    r.flare_rpm
                ),
                None => format!("{t:7.2} s  in {} after {:.0} ms", gear_name(gear), duration * 1e3),
            },
            VehicleEventKind::ParkRatchet => format!("{t:7.2} s  park pawl ratchets: too fast to park"),
            VehicleEventKind::LimiterCut => continue,
            _ => continue,
        };
        log.lines.push_back(line);
    }
    if let Some(pad) = pad.as_mut() {
        for n in pad.notices.drain(..) {
            log.lines.push_back(n);
        }
    }
    while log.lines.len() > 7 {
        log.lines.pop_front();
    }
}

fn gear_name(g: i32) -> String {
    match g {
        0 => "N".into(),
        g if g < 0 => "R".into(),
        g => g.to_string(),
    }
}

/// The big gear letter.
fn gear_label(t: &Telemetry, choice: CarChoice) -> String {
    if choice != CarChoice::Auto {
        return gear_name(t.engaged_gear);
    }
    match t.selector {
        Selector::Park => "P".into(),
        Selector::Reverse => "R".into(),
        Selector::Neutral => "N".into(),
        Selector::Drive => format!("D{}", t.engaged_gear.max(0)),
        Selector::Manual => format!("M{}", t.engaged_gear.max(0)),
    }
}

fn update_hud(
    car: Option<Res<Car>>,
    pad: Option<Res<PadState>>,
    log: Res<Log>,
    telemetry: Query<&VehicleTelemetry>,
    inputs: Query<&bevy_driveline::vehicle::VehicleInput>,
    mut texts: Query<(&Readout, &mut Text)>,
    mut tach: Query<(&mut Node, &mut BackgroundColor), (With<TachBar>, Without<PedalBar>)>,
    mut pedals: Query<(&PedalBar, &mut Node), Without<TachBar>>,
    mut lamps: Query<(&RowLamp, &mut BackgroundColor), Without<TachBar>>,
    mut rows: Query<(&RowText, &mut Text), Without<Readout>>,
    mut row_nodes: Query<(&Row, &mut Node), (Without<TachBar>, Without<PedalBar>)>,
) {
    let Some(car) = car else { return };
    let (Ok(tel), Ok(input)) = (telemetry.get(car.root), inputs.get(car.root)) else { return };
    let t = &tel.0;
    let redline = car.spec.engine.rev_limiter.rpm;
    for (r, mut s) in &mut texts {
        s.0 = match r {
            Readout::Title => car.choice.label().to_string(),
            Readout::Status => format!(
                "{}\nkeys: Up throttle, Down brake, Space clutch, E/Q shift, 1-6/R/N gear, P/R/N/D/M selector\n{}",
                pad.as_ref().map_or("", |p| p.status.as_str()),
                if t.running { format!("t = {:.1} s", t.time) } else { "engine off: hold K to start".into() }
            ),
            Readout::Speed => format!("{:.0}", t.speed.abs() * 3.6),
            Readout::Gear => gear_label(t, car.choice),
            Readout::Rpm => format!("{:5.0} rpm   {:4.0} N m", t.engine_rpm, t.engine_torque),
            Readout::Pedals => format!(
                "throttle {:3.0} %\nbrake    {:3.0} %\nclutch   {:3.0} %",
                input.0.throttle * 100.0,
                input.0.brake * 100.0,
                input.0.clutch * 100.0
            ),
            Readout::Messages => log.lines.iter().cloned().collect::<Vec<_>>().join("\n"),
        };
    }
    for (mut node, mut color) in &mut tach {
        let f = (t.engine_rpm / redline).clamp(0.0, 1.0);
        node.width = percent(f * 100.0);
        color.0 = if f > 0.92 {
            Color::srgb(0.95, 0.15, 0.1)
        } else if f > 0.8 {
            SLIPPING
        } else {
            LOCKED
        };
    }
    let values = [input.0.throttle, input.0.brake, input.0.clutch];
    for (p, mut node) in &mut pedals {
        node.height = percent(values[p.0].clamp(0.0, 1.0) * 100.0);
    }
    // The drivetrain rows: (lamp colour, text) per row, or None for an unused row.
    let mut content: [Option<(Color, String)>; ROWS] = Default::default();
    match car.spec.automatic.as_ref().and_then(|a| a.gearbox()) {
        Some(gb) => {
            let lock = match (t.lockup_locked, t.lockup_mode) {
                (true, _) => (LOCKED, "locked"),
                (false, LockupMode::Slip) => (SLIPPING, "controlled slip"),
                (false, LockupMode::Locked) => (SLIPPING, "closing"),
                (false, LockupMode::Open) => (OPEN, "open"),
            };
            content[0] = Some((
                lock.0,
                format!(
                    "converter {:<15} turbine {:5.0} rpm  {:4.0} N m  {}",
                    lock.1,
                    t.turbine_rpm,
                    t.converter_torque,
                    phase_name(t.shift_phase)
                ),
            ));
            for (i, (e, spec)) in t.elements.iter().zip(&gb.elements).enumerate().take(ROWS - 1) {
                let (c, state) = if e.locked {
                    (LOCKED, "locked")
                } else if e.force > 0.02 {
                    (SLIPPING, "slipping")
                } else {
                    (OPEN, "open")
                };
                content[i + 1] = Some((
                    c,
                    format!(
                        "{:<3} {:<8} {:5.1} bar {:5.0} rpm {:5.0} N m {:4.0} C",
                        spec.name,
                        state,
                        e.pressure * 1e-5,
                        e.slip * 60.0 / std::f64::consts::TAU,
                        e.torque,
                        e.temperature
                    ),
                ));
            }
        }
        None => {
            let slip_rpm = t.clutch_slip * 60.0 / std::f64::consts::TAU;
            let (c, state) = if t.clutch_engagement < 0.02 {
                (OPEN, "open")
            } else if slip_rpm.abs() < 1.0 {
                (LOCKED, "locked")
            } else {
                (SLIPPING, "slipping")
            };
            content[0] = Some((c, format!("clutch {state:<8} slip {slip_rpm:6.0} rpm  {:4.0} N m", t.clutch_torque)));
            content[1] = Some((
                if t.clutch_temperature > 250.0 { Color::srgb(0.95, 0.15, 0.1) } else { OPEN },
                format!("clutch {:4.0} C  {:5.1} kW", t.clutch_temperature, t.clutch_power * 1e-3),
            ));
            content[2] = Some((
                if t.engaged_gear == t.selected_gear { LOCKED } else { SLIPPING },
                format!("lever {}  dogs in {}", gear_name(t.selected_gear), gear_name(t.engaged_gear)),
            ));
            content[3] = Some((
                if t.tyre_slip[2].abs() > 1.0 { SLIPPING } else { OPEN },
                format!("rear tyres slip {:5.2} m/s", t.tyre_slip[2]),
            ));
        }
    }
    for (r, mut node) in &mut row_nodes {
        let display = if content[r.0].is_some() { Display::Flex } else { Display::None };
        if node.display != display {
            node.display = display;
        }
    }
    for (l, mut bg) in &mut lamps {
        bg.0 = content[l.0].as_ref().map_or(Color::NONE, |c| c.0);
    }
    for (r, mut s) in &mut rows {
        s.0 = content[r.0].as_ref().map_or(String::new(), |c| c.1.clone());
    }
}

fn phase_name(p: ShiftPhase) -> &'static str {
    match p {
        ShiftPhase::None => "",
        ShiftPhase::Garage => "garage shift",
        ShiftPhase::Fill => "shift: fill",
        ShiftPhase::Torque => "shift: torque phase",
        ShiftPhase::Inertia => "shift: inertia phase",
        ShiftPhase::End => "shift: end",
    }
}

/// Adds this frame's engine and driven-wheel speeds to the plot and redraws it.
fn update_plot(
    car: Option<Res<Car>>,
    telemetry: Query<&VehicleTelemetry>,
    mut log: ResMut<Log>,
    mut dots: Query<(&Dot, &mut Node, &mut Visibility)>,
) {
    let Some(car) = car else { return };
    let Ok(tel) = telemetry.get(car.root) else { return };
    let t = &tel.0;
    let rpm = 60.0 / std::f64::consts::TAU;
    let driven = t.wheel_speed[2].abs().max(t.wheel_speed[0].abs()) * rpm;
    log.engine.push_back(t.engine_rpm / ENGINE_FULL);
    log.wheels.push_back(driven / WHEEL_FULL);
    while log.engine.len() > PLOT_SAMPLES {
        log.engine.pop_front();
        log.wheels.pop_front();
    }
    let n = log.engine.len();
    for (d, mut node, mut vis) in &mut dots {
        // Newest sample at the right edge.
        let Some(k) = (d.1 + n).checked_sub(PLOT_SAMPLES) else {
            *vis = Visibility::Hidden;
            continue;
        };
        let v = if d.0 == 0 { log.engine[k] } else { log.wheels[k] };
        node.top = px(PLOT_H * (1.0 - v.clamp(0.0, 1.0) as f32) - 1.5);
        *vis = Visibility::Inherited;
    }
}
