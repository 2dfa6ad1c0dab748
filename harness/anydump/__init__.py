"""Any program's XLA dump and profile analysed, and its report (`python -m harness.analyze`).

    dump        the dump folder (or one HLO file) read: modules, clusters, costs, reverse
                maps, and the profile's events attributed to them
    analysis    the main program and its helpers chosen, the steps counted, each module
                analysed (harness.analyze.module_analysis) into a ProgramAnalysis
    report      report.md, report.html and plots/ of that analysis
    main        the command line: flags, the output folder, the terminal lines

A product beside the study: it shares the study's ranking of a module's clusters
(harness.analyze.module_analysis, .sources, .program) and its tables
(harness.report.cluster_tables), and neither imports it. It never runs JAX.
"""
