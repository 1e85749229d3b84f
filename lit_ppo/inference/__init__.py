"""Using a trained policy outside training: ``load_policy``, exported files, evaluation videos."""
