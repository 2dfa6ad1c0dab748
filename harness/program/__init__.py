"""The program analysis: any program's XLA dump and profile, its modules' clusters ranked.

    modules          a dump's HLO read: clusters, costs, control flow, passes (also the study's)
    dump             the dump folder (or one HLO file) read into module results, and the
                     profile's events attributed to them (hosts: a session of several hosts)
    event_facts      the attributed events summed per module, kernel and step
    steps, sources   steps counted and timed; clusters rolled up by source line and scope
    roof             the roofline: each cluster against the ceilings' roofs
    module_analysis  one module analysed into a ModuleAnalysis
    analysis         the main program and its helpers chosen, each module analysed into a
                     ProgramAnalysis (harness.records.program's records; record.py holds
                     the parsed input, ModuleInput)
    timeline         the attributed events as a Perfetto timeline
    report           report.md, report.html and plots/ of that analysis (above harness.report)
    standalone       the whole analysis written into a folder: what `python -m
                     harness.analyze` runs (above harness.report)

The study's ranking (harness.analyze.ranking) and `python -m harness.analyze` call the same
code here. It reads files only and never runs JAX.
"""
