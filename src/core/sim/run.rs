//! The seeded scheduler (filled in below).
