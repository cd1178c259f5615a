"""Built-in discovery problems. Each is one stdlib-only module (it is copied into the sandbox that evaluates
attempts): `NAME`, `DIRECTION`, `SOLUTION_FORMAT`, `OPTIONS`, `task(**options)`, `seeds(**options)`,
`evaluate(solution, **options)` and, where one is known, `best_known(**options)`."""

BUILTIN = {
    "circle-packing": "reef.discovery.problems.circle_packing",
    "erdos-min-overlap": "reef.discovery.problems.erdos_min_overlap",
}
