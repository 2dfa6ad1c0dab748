"""Names in harness/ that vulture (`--min-confidence 60`) reports as unused, each with why it
stays; tests/test_dead_code.py fails on any other. Remake it with the script in its test's
docstring after removing what is really dead: a name listed here must have a reason."""

# ruff: noqa
_ = object()

_.break_details  # harness/capture/torch_env.py:103: field of the record ExplainFacts: written to JSON through dataclasses.fields
_.pre_to_post  # harness/inductor/artifacts.py:356: field of the record Provenance: written to JSON through dataclasses.fields
_.post_to_pre  # harness/inductor/artifacts.py:357: field of the record Provenance: written to JSON through dataclasses.fields
_.post_to_code  # harness/inductor/artifacts.py:359: field of the record Provenance: written to JSON through dataclasses.fields
_.ir_post_fusion  # harness/inductor/artifacts.py:431: field of the record InductorGraph: written to JSON through dataclasses.fields
_.dynamo_tracing_s  # harness/inductor/trace_log.py:128: field of the record CompileTimes: written to JSON through dataclasses.fields
_.guards_s  # harness/inductor/trace_log.py:129: field of the record CompileTimes: written to JSON through dataclasses.fields
_.aot_s  # harness/inductor/trace_log.py:130: field of the record CompileTimes: written to JSON through dataclasses.fields
_.inductor_s  # harness/inductor/trace_log.py:131: field of the record CompileTimes: written to JSON through dataclasses.fields
_.kernel_compile_s  # harness/inductor/trace_log.py:132: field of the record CompileTimes: written to JSON through dataclasses.fields
_.cpu_share_median  # harness/machine_state.py:53: field of the record MachineState: written to JSON through dataclasses.fields
_.collective_events  # harness/match/comm.py:67: field of the record DeviceStep: written to JSON through dataclasses.fields
_.span_s  # harness/match/comm.py:68: field of the record DeviceStep: written to JSON through dataclasses.fields
_.achieved_s  # harness/match/comm.py:419: field of the record LinkComparison: written to JSON through dataclasses.fields
_.compile_event  # harness/profile/compile.py:93: field of the record CompileBreakdown: written to JSON through dataclasses.fields
_.total_compile_s  # harness/profile/compile.py:94: field of the record CompileBreakdown: written to JSON through dataclasses.fields
_.top_level  # harness/profile/compile.py:95: field of the record CompileBreakdown: written to JSON through dataclasses.fields
_.autotune_events  # harness/profile/compile.py:99: field of the record CompileBreakdown: written to JSON through dataclasses.fields
_.jax_events  # harness/profile/compile.py:100: field of the record CompileBreakdown: written to JSON through dataclasses.fields
_.exit_code  # harness/summary.py:54: field of the record Failure: written to JSON through dataclasses.fields
_.interleaved  # harness/summary.py:163: field of the record Timing: written to JSON through dataclasses.fields
_.compiled_graphs  # harness/summary.py:248: field of the record Dynamo: written to JSON through dataclasses.fields
_.recompile_guard_count  # harness/summary.py:255: field of the record Dynamo: written to JSON through dataclasses.fields
_.transcendentals_xla  # harness/summary.py:350: field of the record Cost: written to JSON through dataclasses.fields
_.peak_flops_per_s  # harness/summary.py:356: field of the record Cost: written to JSON through dataclasses.fields
_.peak_source  # harness/summary.py:358: field of the record Cost: written to JSON through dataclasses.fields
_.profiled_step_time_s  # harness/summary.py:381: field of the record Profile: written to JSON through dataclasses.fields
_.unmatched_events  # harness/summary.py:386: field of the record Profile: written to JSON through dataclasses.fields
_.unlaunched_clusters  # harness/summary.py:396: field of the record Profile: written to JSON through dataclasses.fields
_.compute_per_step_s  # harness/summary.py:491: field of the record Comm: written to JSON through dataclasses.fields
_.idle_per_step_s  # harness/summary.py:496: field of the record Comm: written to JSON through dataclasses.fields
_.collective_events  # harness/summary.py:501: field of the record Comm: written to JSON through dataclasses.fields
_.max_abs_err  # harness/summary.py:521: field of the record Numerics: written to JSON through dataclasses.fields
_.max_rel_err  # harness/summary.py:522: field of the record Numerics: written to JSON through dataclasses.fields
_.schema_version  # harness/summary.py:627: field of the record RunSummary: written to JSON through dataclasses.fields
_.numerics_ok  # harness/summary.py:790: field of the record Candidate: written to JSON through dataclasses.fields
_.schema_version  # harness/summary.py:797: field of the record SearchRecord: written to JSON through dataclasses.fields
_.generated_code_bytes  # harness/summary_memory.py:55: field of the record CompilerMemory: written to JSON through dataclasses.fields
_.alias_bytes  # harness/summary_memory.py:56: field of the record CompilerMemory: written to JSON through dataclasses.fields
_.in_use_before  # harness/summary_memory.py:70: field of the record DevicePeak: written to JSON through dataclasses.fields
_.peak_after  # harness/summary_memory.py:71: field of the record DevicePeak: written to JSON through dataclasses.fields
_.peak_source  # harness/summary_memory.py:98: field of the record Memory: written to JSON through dataclasses.fields
_.buffers_at_peak_bytes  # harness/summary_memory.py:103: field of the record Memory: written to JSON through dataclasses.fields
_.cross_process  # harness/summary_processes.py:150: field of the record VariantProcesses: written to JSON through dataclasses.fields
_.device_process  # harness/summary_processes.py:163: field of the record ProcessesSummary: written to JSON through dataclasses.fields
_._HEADER_LOCK_DIR  # harness/capture/torch_env.py:518: sets codecache._HEADER_LOCK_DIR, which the library that owns codecache reads
_.python_tracer_level  # harness/capture/variant.py:92: sets options.python_tracer_level, which the library that owns options reads
_.launcher_by_correlation  # harness/profile/torch_trace.py:131: property of TorchTrace, read by tests/test_torch_trace.py
_.log_errors  # harness/textsafety.py:49: sets options.log_errors, which the library that owns options reads
_.max_mem  # harness/textsafety.py:50: sets options.max_mem, which the library that owns options reads
_.pipelined_step_time  # harness/capture/measure.py:70: kept for benchmarks/profile_overhead.py
_.BACKWARD_MULTIPLE  # harness/hlo/library_cost.py:41: kept for tests/test_library_cost.py
_.parse_attributes  # harness/hlo/instruction.py:148: kept for tests/test_parser_bounds.py
_.output_array  # harness/hlo/instruction.py:502: kept for benchmarks/fuzz_hlo.py, tests/test_parser_bounds.py
_.print_module  # harness/hlo/parser.py:554: kept for benchmarks/fuzz_hlo.py, tests/test_hlo_parser.py, tests/test_hlo_passes.py
_.read_graphs  # harness/inductor/artifacts.py:514: kept for tests/test_torch_artifacts.py, tests/test_torch_cpu.py, tests/test_torch_trace.py
_.graphs_from_trace  # harness/inductor/artifacts.py:588: kept for tests/test_torch_artifacts.py
_.split_by_device  # harness/profile/devices.py:54: kept for tests/test_comm.py
_.runs_by_step  # harness/profile/devices.py:72: kept for tests/test_comm.py
_.read_device_events  # harness/profile/events.py:212: kept for benchmarks/profile_overhead.py, tests/test_analyze_program.py, tests/test_match_events.py
_.torch_events_to_json  # harness/profile/torch_trace.py:453: kept for tests/test_torch_trace.py
_.PLOT_NAMES  # harness/report/plots.py:29: kept for tests/test_report.py, tests/test_report_browser.py
_.validateLink  # harness/report/doc.py:197: markdown-it's link check, replaced on the parser: a library object's attribute set here
_.was  # harness/summary_findings.py:49: field of the record ConfigChange: written to JSON through dataclasses.fields
_.against_kernels_per_step  # harness/summary_findings.py:77: field of the record TimingFinding: written to JSON through dataclasses.fields
_.python  # harness/run_records.py:40: field of the record Environment: written to JSON through dataclasses.fields
_.host_devices  # harness/run_records.py:50: field of the record Environment: written to JSON through dataclasses.fields
_.compiler_options  # harness/run_records.py:74: field of the record Manifest: written to JSON through dataclasses.fields
_.resumed  # harness/run_records.py:76: field of the record Manifest: written to JSON through dataclasses.fields
_.bytes_source  # harness/run_records.py:104: field of the record Ceilings: written to JSON through dataclasses.fields
_.pass_  # harness/run_records.py:257: field of the records PassRow and CommStage: written to JSON through dataclasses.fields (as `pass`)
_.first_call  # harness/run_records.py:318: field of the records CompileFile and TorchCompileFile: written to JSON through dataclasses.fields
_.unregister  # harness/frontends/registry.py:116: kept for tests/test_frontends.py (a test's plug-in is taken out again)
_.mechanisms  # harness/analyze/rules/words.py:234: the phrases of mechanism_parts, kept for tests/test_rules.py and tests/test_graded.py; also TimingFinding's field (harness/summary_findings.py), written to JSON through dataclasses.fields
_.sample_seed  # harness/summary_numerics.py: field of the record AccuracyFile: the seed outputs.npz's sample was drawn with, for a reader of the file
_.vs_eager  # harness/summary_numerics.py: field of the record LeafDistance: written to distances.json through dataclasses.fields
_.traceEvents  # harness/run_records.py:474: field of the record TimelineFile: written to JSON through dataclasses.fields (the Chrome trace key)
_.displayTimeUnit  # harness/run_records.py:475: field of the record TimelineFile: written to JSON through dataclasses.fields (the Chrome trace key)
_.read_gzipped  # harness/run_records.py:616: kept for tests/test_timeline.py
_.has_control_flow  # harness/hlo/thunks.py:79: kept for tests/test_command_buffers.py, tests/test_thunk_tree.py
_.copy_share  # harness/summary_findings.py:236: field of the record ControlFlowFinding: written to JSON through dataclasses.fields
_.syncs_per_step  # harness/summary_findings.py:237: field of the record ControlFlowFinding: written to JSON through dataclasses.fields
