"""The parts of `Repository` (app/storage/repository.py), one per table.

Each part reads and writes its own table only, through the shared write path of
`TableBase` (base.py); what spans several tables (deletes that cascade, the namespace
overview) is in repository.py, where the parts are put together.
"""
