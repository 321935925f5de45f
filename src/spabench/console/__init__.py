"""The browser console: the bench page (camera check, trial card, reference overlay, live views, stop
keys, score form) and the review pages (attempt list, synchronised five-camera playback, scoring,
rescoring, second rater), served by Starlette + uvicorn over the same operator logic as the terminal.

The console never drives the robot: at the bench it talks to the run's Session through
`channel.BenchChannel`; offline it reads the ledger and the recorded episodes.
"""
