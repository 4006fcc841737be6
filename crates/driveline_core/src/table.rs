//! One-dimensional tables with linear interpolation (the MSL `mu_pos`, `tau_pos` tables).

use serde::{Deserialize, Serialize};

/// A table `y(x)` over strictly increasing abscissae, linearly interpolated and held constant
/// beyond its ends (MSL `Tables.CombiTable1D` with `extrapolation = HoldLastPoint`).
///
/// # Example
/// ```
/// use driveline_core::Table1D;
/// let mu = Table1D::new(vec![(0.0, 0.5), (10.0, 0.4)]).unwrap();
/// assert_eq!(mu.eval(5.0), 0.45);
/// assert_eq!(mu.eval(50.0), 0.4);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Table1D {
    points: Vec<(f64, f64)>,
}

/// What is wrong with a table.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TableError {
    /// No rows at all.
    #[error("the table is empty; give at least one row (x, y)")]
    Empty,
    /// A value is NaN or infinite.
    #[error("row {row} holds a non-finite value; every x and y must be a finite number")]
    NotFinite {
        /// Zero-based row index.
        row: usize,
    },
    /// Abscissae do not increase.
    #[error("x must increase strictly from row to row, but row {row} has x = {x} after {prev}")]
    NotIncreasing {
        /// Zero-based row index.
        row: usize,
        /// The offending abscissa.
        x: f64,
        /// The abscissa of the row before.
        prev: f64,
    },
}

impl Table1D {
    /// Builds a table after checking that it is non-empty, finite and strictly increasing in x.
    pub fn new(points: Vec<(f64, f64)>) -> Result<Self, TableError> {
        let t = Self { points };
        t.validate()?;
        Ok(t)
    }

    /// A constant table `y(x) = y`.
    pub fn constant(y: f64) -> Self {
        Self { points: vec![(0.0, y)] }
    }

    /// Checks the invariants [`Table1D::new`] enforces (deserialised tables call this).
    pub fn validate(&self) -> Result<(), TableError> {
        if self.points.is_empty() {
            return Err(TableError::Empty);
        }
        for (i, &(x, y)) in self.points.iter().enumerate() {
            if !x.is_finite() || !y.is_finite() {
                return Err(TableError::NotFinite { row: i });
            }
            if i > 0 && x <= self.points[i - 1].0 {
                return Err(TableError::NotIncreasing { row: i, x, prev: self.points[i - 1].0 });
            }
        }
        Ok(())
    }

    /// The rows `(x, y)`.
    pub fn points(&self) -> &[(f64, f64)] {
        &self.points
    }

    /// True when every y is the same, so the table is a constant.
    pub fn is_constant(&self) -> bool {
        self.points.iter().all(|p| p.1 == self.points[0].1)
    }

    /// Linear interpolation at `x`, held constant beyond the ends.
    #[inline]
    pub fn eval(&self, x: f64) -> f64 {
        self.eval_with_slope(x).0
    }

    /// Value and slope `dy/dx` at `x` (slope 0 beyond the ends).
    pub fn eval_with_slope(&self, x: f64) -> (f64, f64) {
        let p = &self.points;
        if p.len() == 1 || x <= p[0].0 {
            return (p[0].1, 0.0);
        }
        let last = p[p.len() - 1];
        if x >= last.0 {
            return (last.1, 0.0);
        }
        // Tables are short (a few rows): a linear scan is faster than bisection.
        let mut i = 1;
        while p[i].0 < x {
            i += 1;
        }
        let (x0, y0) = p[i - 1];
        let (x1, y1) = p[i];
        let s = (y1 - y0) / (x1 - x0);
        (y0 + s * (x - x0), s)
    }

    /// Smallest and largest y.
    pub fn y_range(&self) -> (f64, f64) {
        self.points.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_non_monotonic() {
        let e = Table1D::new(vec![(0.0, 1.0), (2.0, 1.0), (1.0, 0.0)]).unwrap_err();
        assert!(matches!(e, TableError::NotIncreasing { row: 2, .. }));
    }

    #[test]
    fn interpolates_and_holds() {
        let t = Table1D::new(vec![(0.0, 0.5), (1.0, 1.0)]).unwrap();
        assert_eq!(t.eval(-1.0), 0.5);
        assert_eq!(t.eval(0.5), 0.75);
        assert_eq!(t.eval_with_slope(0.5).1, 0.5);
        assert_eq!(t.eval(3.0), 1.0);
    }
}
