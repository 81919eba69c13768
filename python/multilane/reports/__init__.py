"""Per-seed report sections (the report's benchmark parts; report.py assembles them).

Each module has `section(runs, checks, out_dir, table)` returning a stripe_report.Section:
figures written into out_dir, Markdown lines, terminal text and notes, computed from the
result files and the test bed's check files only."""
