"""The operator: reset checklists, reference images, the ready gate, stop keys and scoring.

Import from the submodules (`.config`, `.checklist`, `.terminal`, `.auto`, `.commands`).
"""
