"""Names in harness/ that vulture (`--min-confidence 60`) reports as unused, each with why it
stays; tests/test_dead_code.py fails on any other. Remake it with the script in its test's
docstring after removing what is really dead: a name listed here must have a reason."""

# ruff: noqa
_ = object()

_.break_details  # harness/frontends/torch/env.py:103: field of the record ExplainFacts: written to JSON through dataclasses.fields
_.pre_to_post  # harness/frontends/torch/inductor/artifacts.py:356: field of the record Provenance: written to JSON through dataclasses.fields
_.post_to_pre  # harness/frontends/torch/inductor/artifacts.py:357: field of the record Provenance: written to JSON through dataclasses.fields
_.post_to_code  # harness/frontends/torch/inductor/artifacts.py:359: field of the record Provenance: written to JSON through dataclasses.fields
_.ir_post_fusion  # harness/frontends/torch/inductor/artifacts.py:431: field of the record InductorGraph: written to JSON through dataclasses.fields
_.dynamo_tracing_s  # harness/frontends/torch/inductor/trace_log.py:128: field of the record CompileTimes: written to JSON through dataclasses.fields
_.guards_s  # harness/frontends/torch/inductor/trace_log.py:129: field of the record CompileTimes: written to JSON through dataclasses.fields
_.aot_s  # harness/frontends/torch/inductor/trace_log.py:130: field of the record CompileTimes: written to JSON through dataclasses.fields
_.inductor_s  # harness/frontends/torch/inductor/trace_log.py:131: field of the record CompileTimes: written to JSON through dataclasses.fields
_.kernel_compile_s  # harness/frontends/torch/inductor/trace_log.py:132: field of the record CompileTimes: written to JSON through dataclasses.fields
_.cpu_share_median  # harness/records/machine_state.py:53: field of the record MachineState: written to JSON through dataclasses.fields
_.collective_events  # harness/match/comm.py:67: field of the record DeviceStep: written to JSON through dataclasses.fields
_.span_s  # harness/match/comm.py:68: field of the record DeviceStep: written to JSON through dataclasses.fields
_.achieved_s  # harness/match/comm.py:419: field of the record LinkComparison: written to JSON through dataclasses.fields
_.compile_event  # harness/profile/compile.py:93: field of the record CompileBreakdown: written to JSON through dataclasses.fields
_.total_compile_s  # harness/profile/compile.py:94: field of the record CompileBreakdown: written to JSON through dataclasses.fields
_.top_level  # harness/profile/compile.py:95: field of the record CompileBreakdown: written to JSON through dataclasses.fields
_.autotune_events  # harness/profile/compile.py:99: field of the record CompileBreakdown: written to JSON through dataclasses.fields
_.jax_events  # harness/profile/compile.py:100: field of the record CompileBreakdown: written to JSON through dataclasses.fields
_.exit_code  # harness/records/summary.py:54: field of the record Failure: written to JSON through dataclasses.fields
_.interleaved  # harness/records/summary.py:163: field of the record Timing: written to JSON through dataclasses.fields
_.compiled_graphs  # harness/records/summary.py:248: field of the record Dynamo: written to JSON through dataclasses.fields
_.recompile_guard_count  # harness/records/summary.py:255: field of the record Dynamo: written to JSON through dataclasses.fields
_.transcendentals_xla  # harness/records/summary.py:350: field of the record Cost: written to JSON through dataclasses.fields
_.peak_flops_per_s  # harness/records/summary.py:356: field of the record Cost: written to JSON through dataclasses.fields
_.peak_source  # harness/records/summary.py:358: field of the record Cost: written to JSON through dataclasses.fields
_.profiled_step_time_s  # harness/records/summary.py:381: field of the record Profile: written to JSON through dataclasses.fields
_.unmatched_events  # harness/records/summary.py:386: field of the record Profile: written to JSON through dataclasses.fields
_.unlaunched_clusters  # harness/records/summary.py:396: field of the record Profile: written to JSON through dataclasses.fields
_.compute_per_step_s  # harness/records/summary.py:491: field of the record Comm: written to JSON through dataclasses.fields
_.idle_per_step_s  # harness/records/summary.py:496: field of the record Comm: written to JSON through dataclasses.fields
_.collective_events  # harness/records/summary.py:501: field of the record Comm: written to JSON through dataclasses.fields
_.max_abs_err  # harness/records/summary.py:521: field of the record Numerics: written to JSON through dataclasses.fields
_.max_rel_err  # harness/records/summary.py:522: field of the record Numerics: written to JSON through dataclasses.fields
_.schema_version  # harness/records/summary.py:627: field of the record RunSummary: written to JSON through dataclasses.fields
_.numerics_ok  # harness/records/search.py:80: field of the record Candidate: written to JSON through dataclasses.fields
_.schema_version  # harness/records/search.py:104: field of the record SearchRecord: written to JSON through dataclasses.fields
_.best_xla_options  # harness/records/search.py:124: field of the record SearchRecord: written to JSON through dataclasses.fields
_.generated_code_bytes  # harness/records/memory.py:55: field of the record CompilerMemory: written to JSON through dataclasses.fields
_.alias_bytes  # harness/records/memory.py:56: field of the record CompilerMemory: written to JSON through dataclasses.fields
_.in_use_before  # harness/records/memory.py:70: field of the record DevicePeak: written to JSON through dataclasses.fields
_.peak_after  # harness/records/memory.py:71: field of the record DevicePeak: written to JSON through dataclasses.fields
_.peak_source  # harness/records/memory.py:98: field of the record Memory: written to JSON through dataclasses.fields
_.buffers_at_peak_bytes  # harness/records/memory.py:103: field of the record Memory: written to JSON through dataclasses.fields
_.cross_process  # harness/records/processes.py:150: field of the record VariantProcesses: written to JSON through dataclasses.fields
_.device_process  # harness/records/processes.py:163: field of the record ProcessesSummary: written to JSON through dataclasses.fields
_._HEADER_LOCK_DIR  # harness/frontends/torch/env.py:518: sets codecache._HEADER_LOCK_DIR, which the library that owns codecache reads
_.python_tracer_level  # harness/capture/variant.py:92: sets options.python_tracer_level, which the library that owns options reads
_.launcher_by_correlation  # harness/frontends/torch/trace.py:131: property of TorchTrace, read by tests/test_torch_trace.py
_.log_errors  # harness/common/textsafety.py:49: sets options.log_errors, which the library that owns options reads
_.max_mem  # harness/common/textsafety.py:50: sets options.max_mem, which the library that owns options reads
_.pipelined_step_time  # harness/capture/measure.py:70: kept for benchmarks/profile_overhead.py
_.BACKWARD_MULTIPLE  # harness/hlo/library_cost.py:41: kept for tests/test_library_cost.py
_.parse_attributes  # harness/hlo/instruction.py:148: kept for tests/test_parser_bounds.py
_.output_array  # harness/hlo/instruction.py:502: kept for benchmarks/fuzz_hlo.py, tests/test_parser_bounds.py
_.print_module  # harness/hlo/parser.py:554: kept for benchmarks/fuzz_hlo.py, tests/test_hlo_parser.py, tests/test_hlo_passes.py
_.read_graphs  # harness/frontends/torch/inductor/artifacts.py:514: kept for tests/test_torch_artifacts.py, tests/test_torch_cpu.py, tests/test_torch_trace.py
_.graphs_from_trace  # harness/frontends/torch/inductor/artifacts.py:588: kept for tests/test_torch_artifacts.py
_.split_by_device  # harness/profile/devices.py:54: kept for tests/test_comm.py
_.runs_by_step  # harness/profile/devices.py:72: kept for tests/test_comm.py
_.read_device_events  # harness/profile/events.py:212: kept for benchmarks/profile_overhead.py, tests/test_analyze_program.py, tests/test_match_events.py
_.torch_events_to_json  # harness/frontends/torch/trace.py:453: kept for tests/test_torch_trace.py
_.PLOT_NAMES  # harness/report/plots.py:29: kept for tests/test_report.py, tests/test_report_browser.py
_.validateLink  # harness/report/doc.py:197: markdown-it's link check, replaced on the parser: a library object's attribute set here
_.was  # harness/records/findings.py:49: field of the record ConfigChange: written to JSON through dataclasses.fields
_.against_kernels_per_step  # harness/records/findings.py:77: field of the record TimingFinding: written to JSON through dataclasses.fields
_.python  # harness/records/run_files.py:40: field of the record Environment: written to JSON through dataclasses.fields
_.host_devices  # harness/records/run_files.py:50: field of the record Environment: written to JSON through dataclasses.fields
_.compiler_options  # harness/records/run_files.py:74: field of the record Manifest: written to JSON through dataclasses.fields
_.resumed  # harness/records/run_files.py:76: field of the record Manifest: written to JSON through dataclasses.fields
_.bytes_source  # harness/records/run_files.py:104: field of the record Ceilings: written to JSON through dataclasses.fields
_.pass_  # harness/records/run_files.py:257: field of the records PassRow and CommStage: written to JSON through dataclasses.fields (as `pass`)
_.first_call  # harness/records/run_files.py:318: field of the records CompileFile and TorchCompileFile: written to JSON through dataclasses.fields
_.unregister  # harness/frontends/registry.py:116: kept for tests/test_frontends.py (a test's plug-in is taken out again)
_.mechanisms  # harness/findings/words.py:234: the phrases of mechanism_parts, kept for tests/test_rules.py and tests/test_graded.py; also TimingFinding's field (harness/records/findings.py), written to JSON through dataclasses.fields
_.sample_seed  # harness/records/numerics.py: field of the record AccuracyFile: the seed outputs.npz's sample was drawn with, for a reader of the file
_.vs_eager  # harness/records/numerics.py: field of the record LeafDistance: written to distances.json through dataclasses.fields
_.traceEvents  # harness/records/run_files.py:474: field of the record TimelineFile: written to JSON through dataclasses.fields (the Chrome trace key)
_.displayTimeUnit  # harness/records/run_files.py:475: field of the record TimelineFile: written to JSON through dataclasses.fields (the Chrome trace key)
_.read_gzipped  # harness/records/run_files.py:616: kept for tests/test_timeline.py
_.has_control_flow  # harness/hlo/thunks.py:79: kept for tests/test_command_buffers.py, tests/test_thunk_tree.py
_.copy_share  # harness/records/findings.py:236: field of the record ControlFlowFinding: written to JSON through dataclasses.fields
_.syncs_per_step  # harness/records/findings.py:237: field of the record ControlFlowFinding: written to JSON through dataclasses.fields
_.steady_s  # harness/records/probes.py:27: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.profile_s  # harness/records/probes.py:28: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.ir_s  # harness/records/probes.py:35: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.keep_s  # harness/records/probes.py:36: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.reference_compute_s  # harness/records/probes.py:38: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.reference_reused  # harness/records/probes.py:41: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.reference_overlapped  # harness/records/probes.py:45: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.over_budget  # harness/records/rounds.py:26: field of the record RoundsCut: written to JSON through dataclasses.fields
_.probe_s  # harness/records/summary.py:600: field of the record CaptureRecord: written to JSON through dataclasses.fields
_.compile_profiler  # harness/records/torch_facts.py:82: field of the record TorchFacts and its parts: written to JSON through dataclasses.fields
_.trace_handler  # harness/records/torch_facts.py:85: field of the record TorchFacts and its parts: written to JSON through dataclasses.fields
_.capture_env  # harness/records/torch_facts.py:105: field of the record TorchFacts and its parts: written to JSON through dataclasses.fields
_.features  # harness/records/torch_facts.py:117: field of the record TorchFacts and its parts: written to JSON through dataclasses.fields
_.turn_wait_s  # harness/records/probes.py: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.compile_wait_s  # harness/records/probes.py: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.turn_began  # harness/records/probes.py: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.dump_s  # harness/records/probes.py: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.turn_ended  # harness/records/probes.py: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.turn_shared  # harness/records/probes.py: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.compiles_asked  # harness/records/probes.py: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.capture_ended  # harness/records/probes.py: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.turn_asked  # harness/records/probes.py: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.turn_go  # harness/records/probes.py: field of the record ProbeCosts: written to JSON through dataclasses.fields
_.prepare_s  # harness/records/summary.py: field of the record TimedVariant: written to JSON through dataclasses.fields
_.create_module  # harness/__init__.py:44: the import system's Loader protocol (moved commands)
_.get_code  # harness/__init__.py:50: the Loader protocol runpy calls for `python -m` (moved commands)
_.read_events  # harness/program/dump.py: events.parquet's rows, for tests/test_timeline.py and tests/test_analyze_cli.py
_.read_step_markers  # harness/profile/events.py: jaxlib's own reader of the markers, kept for tests that check the event table against it
_.host_launch_times  # harness/profile/events.py: jaxlib's own reader of the launches, kept for tests that check the event table against it
_.map_entry  # harness/profile/xspace.py: a protobuf descriptor option, set by attribute
_.oneof_index  # harness/profile/xspace.py: a protobuf descriptor field, set by attribute
_.read_gzip  # harness/common/userfiles.py: the bounded gzip read, for tests/test_one_reader.py
_.writable  # harness/common/bounded.py: the io protocol's method, called by print()
_.from_arrow  # harness/profile/table.py: events.parquet read back as an EventTable (tests/test_table_match.py)
