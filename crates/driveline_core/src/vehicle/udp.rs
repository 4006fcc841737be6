//! Telemetry over UDP for dashboards and motion rigs: one fixed-size little-endian datagram per
//! period, no allocation per packet.
//!
//! # Packet layout (version 1, 160 bytes, little-endian)
//! | offset | type | field |
//! |---|---|---|
//! | 0 | `[u8; 4]` | magic `DRVL` |
//! | 4 | u16 | version (1) |
//! | 6 | u16 | packet length in bytes (160) |
//! | 8 | u32 | sequence number (wraps) |
//! | 12 | f64 | simulation time, s |
//! | 20 | f32 | engine speed, rpm |
//! | 24 | f32 | vehicle speed, m/s |
//! | 28 | f32 | acceleration, m/s^2 |
//! | 32 | i8 | engaged gear (-1 R, 0 N) |
//! | 33 | i8 | selected or target gear |
//! | 34 | u8 | flags: bit 0 engine running, bit 1 lock-up locked, bit 2 shift in progress |
//! | 35 | u8 | reserved (0) |
//! | 36 | f32 | accelerator pedal, [0, 1] |
//! | 40 | f32 | brake pedal, [0, 1] |
//! | 44 | f32 | clutch pedal, [0, 1] |
//! | 48 | f32 | effective throttle after the engine controller, [0, 1] |
//! | 52 | f32 | clutch (or lock-up) slip, rad/s |
//! | 56 | f32 | clutch temperature, deg C |
//! | 60 | f32 | turbine speed, rpm (0 without a converter) |
//! | 64 | f32 | engine torque, N m |
//! | 68 | `[f32; 4]` | wheel speeds fl, fr, rl, rr, rad/s |
//! | 84 | `[f32; 4]` | tyre slip speeds, m/s |
//! | 100 | `[f32; 4]` | tyre longitudinal forces, N |
//! | 116 | `[f32; 8]` | shift element temperatures, deg C (0 where absent) |
//! | 148 | `[f32; 3]` | reserved (0) |

use super::{DriverInput, Telemetry};
use std::net::{SocketAddr, UdpSocket};

/// Bytes in a version 1 packet.
pub const PACKET_LEN: usize = 160;

/// Sends [`Telemetry`] to one address at a fixed rate (in simulated time).
pub struct UdpTelemetry {
    socket: UdpSocket,
    target: SocketAddr,
    period: f64,
    next: f64,
    sequence: u32,
}

impl UdpTelemetry {
    /// A sender to `target` at `rate_hz` packets per simulated second, from an ephemeral local
    /// port.
    pub fn new(target: SocketAddr, rate_hz: f64) -> std::io::Result<Self> {
        if !(rate_hz.is_finite() && rate_hz > 0.0) {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "the rate must be > 0 Hz"));
        }
        let local: SocketAddr = if target.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("valid");
        let socket = UdpSocket::bind(local)?;
        socket.set_nonblocking(true)?;
        Ok(Self { socket, target, period: 1.0 / rate_hz, next: f64::NEG_INFINITY, sequence: 0 })
    }

    /// Sends a packet if one is due at the telemetry's time; returns whether it sent. A full
    /// socket buffer drops the packet (telemetry never blocks the simulation).
    pub fn update(&mut self, t: &Telemetry, input: &DriverInput) -> bool {
        if t.time + 1e-12 < self.next {
            return false;
        }
        self.next = if self.next.is_finite() { self.next + self.period } else { t.time + self.period };
        if self.next <= t.time {
            self.next = t.time + self.period;
        }
        let p = encode(self.sequence, t, input);
        self.sequence = self.sequence.wrapping_add(1);
        self.socket.send_to(&p, self.target).is_ok()
    }
}

/// Encodes one packet (see the module docs for the layout).
pub fn encode(sequence: u32, t: &Telemetry, input: &DriverInput) -> [u8; PACKET_LEN] {
    let mut b = [0u8; PACKET_LEN];
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        b[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    let f = |x: f64| (x as f32).to_le_bytes();
    put(b"DRVL");
    put(&1u16.to_le_bytes());
    put(&(PACKET_LEN as u16).to_le_bytes());
    put(&sequence.to_le_bytes());
    put(&t.time.to_le_bytes());
    put(&f(t.engine_rpm));
    put(&f(t.speed));
    put(&f(t.acceleration));
    put(&[t.engaged_gear.clamp(-128, 127) as i8 as u8, t.selected_gear.clamp(-128, 127) as i8 as u8]);
    let shifting = t.shift_phase != crate::automatic::ShiftPhase::None;
    put(&[u8::from(t.running) | u8::from(t.lockup_locked) << 1 | u8::from(shifting) << 2, 0]);
    for x in [input.throttle, input.brake, input.clutch, t.throttle, t.clutch_slip, t.clutch_temperature] {
        put(&f(x));
    }
    put(&f(t.turbine_rpm));
    put(&f(t.engine_torque));
    for a in [&t.wheel_speed, &t.tyre_slip, &t.tyre_force] {
        for x in a {
            put(&f(*x));
        }
    }
    for e in &t.elements {
        put(&f(if e.present { e.temperature } else { 0.0 }));
    }
    debug_assert_eq!(at, PACKET_LEN - 12);
    b
}

/// A decoded packet's main fields (for receivers written in Rust, and the tests).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Packet {
    /// Sequence number.
    pub sequence: u32,
    /// Time, s.
    pub time: f64,
    /// Engine speed, rpm.
    pub engine_rpm: f32,
    /// Vehicle speed, m/s.
    pub speed: f32,
    /// Engaged gear.
    pub engaged_gear: i8,
    /// Flags (see the layout).
    pub flags: u8,
    /// Accelerator pedal.
    pub throttle_pedal: f32,
    /// Wheel speeds, rad/s.
    pub wheel_speed: [f32; 4],
}

/// Decodes a packet; `None` unless it is a version 1 `DRVL` packet of the right length.
pub fn decode(b: &[u8]) -> Option<Packet> {
    if b.len() != PACKET_LEN || &b[0..4] != b"DRVL" || b[4..6] != 1u16.to_le_bytes() {
        return None;
    }
    let f32_at = |o: usize| f32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
    Some(Packet {
        sequence: u32::from_le_bytes(b[8..12].try_into().ok()?),
        time: f64::from_le_bytes(b[12..20].try_into().ok()?),
        engine_rpm: f32_at(20),
        speed: f32_at(24),
        engaged_gear: b[32] as i8,
        flags: b[34],
        throttle_pedal: f32_at(36),
        wheel_speed: [f32_at(68), f32_at(72), f32_at(76), f32_at(80)],
    })
}
