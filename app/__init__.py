"""The Streamlit attention explorer: `streamlit run app` runs app/streamlit_app.py. Figures live in app.figures."""
