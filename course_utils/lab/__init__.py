"""The notebooks' setting: setup cell, environment report, device, figures, the shipped model."""
