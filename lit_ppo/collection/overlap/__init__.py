"""``data.overlap``: the collector process beside the learner, and what crosses between them."""
