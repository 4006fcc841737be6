//! # driveline_gamepad
//!
//! Gamepads, wheels and shifters for Driveline vehicles, through gilrs: *actions*, not devices.
//! A bindings file maps device buttons and axes to [`Action`]s (throttle, brake, clutch,
//! steering, shift up/down, H-gate gears, P/R/N/D, ignition, starter, handbrake) with dead
//! zones, inversion and response curves; [`ActionState`] keeps what the devices said between
//! frames and hands the fixed step a [`DriverInput`] without losing a press.
//!
//! # Frames and fixed steps
//! Devices are sampled once per frame ([`Gamepads::poll`] or, from any source,
//! [`ActionState::handle`]); the fixed step calls [`ActionState::driver_input`] once per step.
//! A press is latched when it happens: a press shorter than a fixed step still shifts once; a
//! button held over many steps shifts once; two presses in one frame shift twice, one step
//! apart (the vehicle acts on a request's rising edge).
//!
//! # Connection
//! A disconnect releases the throttle, applies the brake and clutch as the bindings say
//! ([`OnDisconnect`]) and is reported as [`PadEvent::Disconnected`]; a machine without a gamepad,
//! or without udev access, runs on: [`Gamepads::new`] never fails, [`Gamepads::status`] says why
//! there is no device.
//!
//! # A bindings file
//! ```
//! # use driveline_gamepad::Bindings;
//! let text = r#"
//! Bindings(
//!     name: "my pad",
//!     analog: [
//!         (action: Throttle, source: Button(RightTrigger2), dead_zone: 0.05, curve: 1.5),
//!         (action: Brake, source: Button(LeftTrigger2)),
//!         (action: Steering, source: Axis(LeftStickX), dead_zone: 0.1),
//!     ],
//!     digital: [
//!         (action: ShiftUp, source: Button(RightTrigger)),
//!         (action: ShiftDown, source: Button(LeftTrigger)),
//!     ],
//! )"#;
//! let b = Bindings::parse(text, "pad.ron").unwrap();
//! assert_eq!(b.analog.len(), 3);
//! // A mistake is placed and named:
//! let bad = text.replace("Throttle", "Thrust");
//! let e = Bindings::parse(&bad, "pad.ron").unwrap_err();
//! assert!(e.starts_with("pad.ron:5:"), "{e}");
//! ```

use driveline_core::automatic::Selector;
use driveline_core::vehicle::DriverInput;
pub use gilrs::{Axis, Button};
use serde::{Deserialize, Serialize};

/// What the driver can do, independent of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// Accelerator, analogue [0, 1].
    Throttle,
    /// Brake, analogue [0, 1].
    Brake,
    /// Clutch pedal, analogue [0, 1] (1 = floored).
    Clutch,
    /// Steering, analogue [-1, 1] (the driveline does not steer; games read it).
    Steering,
    /// Handbrake, analogue or a button, [0, 1].
    Handbrake,
    /// One gear up (sequential box, automatic in manual mode).
    ShiftUp,
    /// One gear down.
    ShiftDown,
    /// H-gate position: gear 1..7 (while held; released = neutral).
    Gear(u8),
    /// H-gate reverse (while held).
    GearReverse,
    /// Selector: park.
    SelectPark,
    /// Selector: reverse.
    SelectReverse,
    /// Selector: neutral.
    SelectNeutral,
    /// Selector: drive.
    SelectDrive,
    /// Selector: manual mode.
    SelectManual,
    /// Ignition switch (toggles on press).
    Ignition,
    /// Starter button (while held).
    Starter,
}

impl Action {
    /// True for actions that take a continuous value.
    pub fn is_analog(self) -> bool {
        matches!(self, Action::Throttle | Action::Brake | Action::Clutch | Action::Steering | Action::Handbrake)
    }
}

/// A device control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Source {
    /// A button (analogue triggers are buttons with a value in gilrs).
    Button(Button),
    /// An axis.
    Axis(Axis),
}

fn zero() -> f64 {
    0.0
}
fn one() -> f64 {
    1.0
}

/// An analogue binding: `value = curve(clamp((raw' - dead_zone) / (1 - dead_zone)))` with
/// `raw'` the raw value, inverted (`1 - raw` for a [0, 1] control, `-raw` for an axis) when
/// `invert`; for [`Action::Steering`] the sign is kept and the curve applies to the magnitude;
/// for pedals a stick's [-1, 1] is read as [0, 1] (negative = 0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalogBinding {
    /// The action.
    pub action: Action,
    /// The control.
    pub source: Source,
    /// Dead zone at rest, [0, 1). Default 0.
    #[serde(default = "zero")]
    pub dead_zone: f64,
    /// Invert the control. Default false.
    #[serde(default)]
    pub invert: bool,
    /// Response exponent (> 0): 1 linear, > 1 finer near rest. Default 1.
    #[serde(default = "one")]
    pub curve: f64,
}

/// A button binding (an analogue control counts as pressed above half travel).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DigitalBinding {
    /// The action.
    pub action: Action,
    /// The control.
    pub source: Source,
}

/// What a disconnect leaves the car with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OnDisconnect {
    /// Brake pedal, [0, 1]. Default 0.3 (the car slows and stops).
    pub brake: f64,
    /// Clutch pedal, [0, 1]. Default 1 (no stall).
    pub clutch: f64,
}

impl Default for OnDisconnect {
    fn default() -> Self {
        Self { brake: 0.3, clutch: 1.0 }
    }
}

/// A bindings file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename = "Bindings")]
pub struct Bindings {
    /// Display name.
    pub name: String,
    /// Analogue bindings.
    #[serde(default)]
    pub analog: Vec<AnalogBinding>,
    /// Button bindings.
    #[serde(default)]
    pub digital: Vec<DigitalBinding>,
    /// Disconnect behaviour.
    #[serde(default)]
    pub disconnect: OnDisconnect,
}

impl Bindings {
    /// Parses and checks a bindings file; errors are `file:line:col: what is wrong`.
    pub fn parse(text: &str, file: &str) -> Result<Bindings, String> {
        let opts = ron::Options::default().with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME);
        let b: Bindings = opts
            .from_str(text)
            .map_err(|e| format!("{file}:{}:{}: {}", e.span.start.line, e.span.start.col, e.code))?;
        b.check().map_err(|(k, m)| {
            // Place the message at the k-th binding's `action:`.
            let (line, col) = text
                .match_indices("action:")
                .nth(k)
                .map(|(at, _)| {
                    let line = text[..at].matches('\n').count() + 1;
                    let col = at - text[..at].rfind('\n').map_or(0, |p| p + 1) + 1;
                    (line, col)
                })
                .unwrap_or((1, 1));
            format!("{file}:{line}:{col}: {m}")
        })?;
        Ok(b)
    }

    /// Reads and parses a bindings file.
    pub fn load(path: &std::path::Path) -> Result<Bindings, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Checks the values; the error carries the index of the binding (analog first).
    fn check(&self) -> Result<(), (usize, String)> {
        for (k, a) in self.analog.iter().enumerate() {
            if !a.action.is_analog() {
                return Err((k, format!("{:?} is a button action; bind it under `digital`", a.action)));
            }
            if !(0.0..1.0).contains(&a.dead_zone) {
                return Err((k, format!("`dead_zone` is {}; it must be in [0, 1)", a.dead_zone)));
            }
            if !(a.curve.is_finite() && a.curve > 0.0) {
                return Err((k, format!("`curve` is {}; it must be > 0", a.curve)));
            }
        }
        for (k, d) in self.digital.iter().enumerate() {
            if let Action::Gear(g) = d.action
                && !(1..=7).contains(&g)
            {
                return Err((self.analog.len() + k, format!("Gear({g}): H-gate gears are 1 to 7")));
            }
            if matches!(d.action, Action::Throttle | Action::Brake | Action::Clutch | Action::Steering) {
                return Err((self.analog.len() + k, format!("{:?} is analogue; bind it under `analog`", d.action)));
            }
        }
        for (k, v) in [self.disconnect.brake, self.disconnect.clutch].iter().enumerate() {
            if !(0.0..=1.0).contains(v) {
                return Err((0, format!("`disconnect` {} is {v}; it must be in [0, 1]", ["brake", "clutch"][k])));
            }
        }
        Ok(())
    }

    /// Default bindings for Xbox-style pads (`bindings/xbox.ron`): triggers for the pedals,
    /// bumpers for shifts, A/B/X/Y for D/R/N/P, the right stick for the clutch, Start for the
    /// starter, Select for the ignition.
    pub fn xbox() -> Self {
        Self::parse(include_str!("../bindings/xbox.ron"), "xbox.ron").expect("shipped bindings are valid")
    }

    /// Default bindings for PlayStation-style pads (`bindings/playstation.ron`; the same layout
    /// under the pad's names).
    pub fn playstation() -> Self {
        Self::parse(include_str!("../bindings/playstation.ron"), "playstation.ron").expect("shipped bindings are valid")
    }
}

/// A device event, from gilrs or any scripted source.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PadEvent {
    /// A device connected.
    Connected,
    /// The device disconnected.
    Disconnected,
    /// A button moved to `value` in [0, 1] (1 = pressed).
    Button(Button, f64),
    /// An axis moved to `value` in [-1, 1].
    Axis(Axis, f64),
}

/// Latched state of the actions between the frame that samples devices and the fixed steps.
#[derive(Debug, Clone)]
pub struct ActionState {
    bindings: Bindings,
    /// Raw values per source.
    raw: Vec<(Source, f64)>,
    pending_up: u32,
    pending_down: u32,
    sent_up: bool,
    sent_down: bool,
    selector: Selector,
    ignition: bool,
    connected: bool,
}

impl ActionState {
    /// A state for `bindings`, with the ignition on and the selector in park.
    pub fn new(bindings: Bindings) -> Self {
        Self {
            bindings,
            raw: Vec::new(),
            pending_up: 0,
            pending_down: 0,
            sent_up: false,
            sent_down: false,
            selector: Selector::Park,
            ignition: true,
            connected: true,
        }
    }

    /// The bindings.
    pub fn bindings(&self) -> &Bindings {
        &self.bindings
    }

    /// The selector position the presses so far have chosen (without consuming any latched
    /// shift press, unlike [`ActionState::driver_input`]).
    pub fn selector(&self) -> Selector {
        self.selector
    }

    /// True while a device is connected.
    pub fn connected(&self) -> bool {
        self.connected
    }

    fn raw(&self, s: Source) -> f64 {
        self.raw.iter().find(|r| r.0 == s).map_or(0.0, |r| r.1)
    }

    fn pressed(v: f64) -> bool {
        v > 0.5
    }

    /// Applies one device event: presses are latched here, at the frame.
    pub fn handle(&mut self, ev: PadEvent) {
        let (source, value) = match ev {
            PadEvent::Connected => {
                self.connected = true;
                return;
            }
            PadEvent::Disconnected => {
                self.connected = false;
                self.raw.clear();
                return;
            }
            PadEvent::Button(b, v) => (Source::Button(b), v),
            PadEvent::Axis(a, v) => (Source::Axis(a), v),
        };
        if !value.is_finite() {
            return;
        }
        let before = self.raw(source);
        match self.raw.iter_mut().find(|r| r.0 == source) {
            Some(r) => r.1 = value,
            None => self.raw.push((source, value)),
        }
        // Rising edges of button actions.
        if Self::pressed(value) && !Self::pressed(before) {
            for d in self.bindings.digital.iter().filter(|d| d.source == source) {
                match d.action {
                    Action::ShiftUp => self.pending_up += 1,
                    Action::ShiftDown => self.pending_down += 1,
                    Action::SelectPark => self.selector = Selector::Park,
                    Action::SelectReverse => self.selector = Selector::Reverse,
                    Action::SelectNeutral => self.selector = Selector::Neutral,
                    Action::SelectDrive => self.selector = Selector::Drive,
                    Action::SelectManual => self.selector = Selector::Manual,
                    Action::Ignition => self.ignition = !self.ignition,
                    _ => {}
                }
            }
        }
    }

    /// Value of an analogue action after dead zone, inversion and curve.
    pub fn analog(&self, action: Action) -> f64 {
        let mut best: f64 = 0.0;
        for a in self.bindings.analog.iter().filter(|a| a.action == action) {
            let mut x = self.raw(a.source);
            let axis = matches!(a.source, Source::Axis(_));
            if a.invert {
                x = if axis { -x } else { 1.0 - x };
            }
            let (sign, mag) = if action == Action::Steering { (x.signum(), x.abs()) } else { (1.0, x.max(0.0)) };
            let m = ((mag - a.dead_zone) / (1.0 - a.dead_zone)).clamp(0.0, 1.0).powf(a.curve);
            let v = sign * m;
            if v.abs() > best.abs() {
                best = v;
            }
        }
        best
    }

    fn held(&self, action: Action) -> bool {
        self.bindings.digital.iter().any(|d| d.action == action && Self::pressed(self.raw(d.source)))
    }

    /// The input for one fixed step. Call it once per step: it hands out latched shift
    /// presses one per step (a step without the request in between, so each is a new edge).
    pub fn driver_input(&mut self) -> DriverInput {
        let mut input = DriverInput {
            throttle: self.analog(Action::Throttle),
            brake: self.analog(Action::Brake),
            clutch: self.analog(Action::Clutch),
            parking_brake: self.analog(Action::Handbrake).max(if self.held(Action::Handbrake) { 1.0 } else { 0.0 }),
            selector: self.selector,
            ignition: self.ignition,
            starter: self.held(Action::Starter),
            ..DriverInput::default()
        };
        input.gear = (1..=7u8)
            .find(|g| self.held(Action::Gear(*g)))
            .map(i32::from)
            .or_else(|| self.held(Action::GearReverse).then_some(-1))
            .unwrap_or(0);
        input.shift_up = !self.sent_up && self.pending_up > 0;
        if input.shift_up {
            self.pending_up -= 1;
        }
        self.sent_up = input.shift_up;
        input.shift_down = !self.sent_down && self.pending_down > 0;
        if input.shift_down {
            self.pending_down -= 1;
        }
        self.sent_down = input.shift_down;
        if !self.connected {
            input.throttle = 0.0;
            input.brake = input.brake.max(self.bindings.disconnect.brake);
            input.clutch = input.clutch.max(self.bindings.disconnect.clutch);
        }
        input
    }
}

/// The devices, through gilrs.
pub struct Gamepads {
    gilrs: Option<gilrs::Gilrs>,
    status: String,
}

impl Gamepads {
    /// Opens gilrs; without devices or udev access it runs on with no device and says why in
    /// [`Gamepads::status`] (never an error).
    pub fn new() -> Self {
        match gilrs::Gilrs::new() {
            Ok(g) => {
                let n = g.gamepads().count();
                Self { gilrs: Some(g), status: format!("gamepads: {n} connected") }
            }
            Err(e) => Self { gilrs: None, status: format!("gamepads unavailable ({e}); keyboard only") },
        }
    }

    /// Devices through a gilrs context made elsewhere (say with `GilrsBuilder`, without the
    /// default filters for scripted input).
    pub fn from_gilrs(gilrs: gilrs::Gilrs) -> Self {
        let n = gilrs.gamepads().count();
        Self { gilrs: Some(gilrs), status: format!("gamepads: {n} connected") }
    }

    /// Queues a gilrs event as if a device had sent it (replays, scripted tests); it is handed
    /// out by the next [`Gamepads::poll`]. Without a gilrs context the event is dropped and
    /// `false` returned.
    pub fn insert_event(&mut self, ev: gilrs::Event) -> bool {
        match self.gilrs.as_mut() {
            Some(g) => {
                g.insert_event(ev);
                true
            }
            None => false,
        }
    }

    /// Why there is (or is no) device.
    pub fn status(&self) -> &str {
        &self.status
    }

    /// Samples every pending device event into `state` (once per frame); returns connection
    /// changes, so the caller can show a message.
    pub fn poll(&mut self, state: &mut ActionState, mut changed: impl FnMut(PadEvent)) {
        let Some(g) = self.gilrs.as_mut() else { return };
        while let Some(ev) = g.next_event() {
            if let Some(e) = translate(&ev.event) {
                if matches!(e, PadEvent::Connected | PadEvent::Disconnected) {
                    changed(e);
                }
                state.handle(e);
            }
        }
    }
}

impl Default for Gamepads {
    fn default() -> Self {
        Self::new()
    }
}

/// A gilrs event as a [`PadEvent`] (`None` for events without meaning here).
pub fn translate(ev: &gilrs::EventType) -> Option<PadEvent> {
    use gilrs::EventType as E;
    Some(match *ev {
        E::ButtonPressed(b, _) => PadEvent::Button(b, 1.0),
        E::ButtonReleased(b, _) => PadEvent::Button(b, 0.0),
        E::ButtonChanged(b, v, _) => PadEvent::Button(b, f64::from(v)),
        E::AxisChanged(a, v, _) => PadEvent::Axis(a, f64::from(v)),
        E::Connected => PadEvent::Connected,
        E::Disconnected => PadEvent::Disconnected,
        _ => return None,
    })
}
