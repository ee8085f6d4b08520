"""The web app's side: record an answer for its linked sheets and push its id."""
