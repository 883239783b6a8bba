-- Placeholder kept so the numbering stays 1..n while the feature is built.
SELECT 1;
