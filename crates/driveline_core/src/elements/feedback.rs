//! Signals that read the motion: a sensor's reading ([`crate::Signal::Measured`]) inside the
//! signal of a torque or force source, compiled for the law that evaluates it with the state
//! (a speed governor, a spring written as a controller).

use super::Row;

/// A source's signal compiled against the state: the parts that depend on time alone are
/// signals of the network (their values come from the signal buffers); a sensor's reading is
/// the angle or the speed along its row.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A signal of the network, by index (depends on time alone).
    Signal(usize),
    /// `row . phi`: an angle sensor's reading, rad.
    Angle(Row),
    /// `row . w`: a speed sensor's reading, rad/s.
    Speed(Row),
    /// The sum of the parts.
    Sum(Vec<Expr>),
    /// The product of the parts.
    Product(Vec<Expr>),
    /// `gain * u`.
    Gain(f64, Box<Expr>),
    /// `a - b`.
    Difference(Box<Expr>, Box<Expr>),
    /// `1 - u`.
    OneMinus(Box<Expr>),
}

impl Expr {
    /// The value at angles `phi`, speeds `w` and signal values `sig`.
    pub fn value(&self, phi: &[f64], w: &[f64], sig: &[f64]) -> f64 {
        match self {
            Expr::Signal(k) => sig[*k],
            Expr::Angle(r) => r.dot(phi),
            Expr::Speed(r) => r.dot(w),
            Expr::Sum(v) => v.iter().map(|e| e.value(phi, w, sig)).sum(),
            Expr::Product(v) => v.iter().map(|e| e.value(phi, w, sig)).product(),
            Expr::Gain(k, u) => k * u.value(phi, w, sig),
            Expr::Difference(a, b) => a.value(phi, w, sig) - b.value(phi, w, sig),
            Expr::OneMinus(u) => 1.0 - u.value(phi, w, sig),
        }
    }

    /// The partial derivatives of `seed` times the value by each reading: `emit(angle, row,
    /// d)` for every sensor reading in the expression (`angle`: of `row . phi`, else of
    /// `row . w`), by the chain rule from the root.
    pub fn gradient(&self, phi: &[f64], w: &[f64], sig: &[f64], seed: f64, emit: &mut impl FnMut(bool, &Row, f64)) {
        match self {
            Expr::Signal(_) => {}
            Expr::Angle(r) => emit(true, r, seed),
            Expr::Speed(r) => emit(false, r, seed),
            Expr::Sum(v) => v.iter().for_each(|e| e.gradient(phi, w, sig, seed, emit)),
            Expr::Product(v) => {
                for (i, e) in v.iter().enumerate() {
                    let others: f64 =
                        v.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, x)| x.value(phi, w, sig)).product();
                    e.gradient(phi, w, sig, seed * others, emit);
                }
            }
            Expr::Gain(k, u) => u.gradient(phi, w, sig, seed * k, emit),
            Expr::Difference(a, b) => {
                a.gradient(phi, w, sig, seed, emit);
                b.gradient(phi, w, sig, -seed, emit);
            }
            Expr::OneMinus(u) => u.gradient(phi, w, sig, -seed, emit),
        }
    }

    /// True when some reading is an angle (the law then reads the angles).
    pub fn reads_angles(&self) -> bool {
        match self {
            Expr::Angle(_) => true,
            Expr::Signal(_) | Expr::Speed(_) => false,
            Expr::Sum(v) | Expr::Product(v) => v.iter().any(Expr::reads_angles),
            Expr::Gain(_, u) | Expr::OneMinus(u) => u.reads_angles(),
            Expr::Difference(a, b) => a.reads_angles() || b.reads_angles(),
        }
    }
}
